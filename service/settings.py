"""All configuration, from the environment, in one object."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# The logging level names that both `logging` and uvicorn (`kvplan serve`) know.
LogLevel = Literal["CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"]


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KVPLAN_", extra="ignore", frozen=True)

    database_url: str = Field(
        default="sqlite:///kvplan.db",
        validation_alias=AliasChoices("DATABASE_URL", "KVPLAN_DATABASE_URL"),
        description="SQLAlchemy URL; default an SQLite file in the working directory.",
    )
    # SecretStr: a settings object that ends up in a log or a traceback shows "**********".
    admin_tokens: SecretStr = Field(
        default=SecretStr(""),
        description="Comma-separated bearer tokens allowed to write the catalog. Empty: no writes.",
    )
    read_keys: SecretStr = Field(
        default=SecretStr(""),
        description="Comma-separated keys every read must present (X-API-KEY header, `api_key` "
        "query parameter, or Authorization: Bearer; admin tokens pass too). Empty: reads open.",
    )
    catalog_ttl_seconds: float = Field(
        default=2.0,
        ge=0,
        description="How long a replica trusts its in-memory catalog before checking the database.",
    )
    capacity_max_age_seconds: int = Field(
        default=30, ge=0, description="Cache-Control max-age of GET /v1/capacity answers."
    )
    log_level: Annotated[LogLevel, BeforeValidator(_upper)] = Field(
        default="INFO", description="Logging level name, in any case (`debug`, `INFO`, ...)."
    )
    db_connect_timeout_seconds: int = Field(default=5, ge=1)
    db_pool_size: int = Field(default=5, ge=1)

    @cached_property
    def admin_token_list(self) -> tuple[str, ...]:
        tokens = self.admin_tokens.get_secret_value().split(",")
        return tuple(t.strip() for t in tokens if t.strip())

    @cached_property
    def read_key_list(self) -> tuple[str, ...]:
        keys = self.read_keys.get_secret_value().split(",")
        return tuple(k.strip() for k in keys if k.strip())

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
