"""All configuration, from the environment, in one object."""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# The logging level names that both `logging` and uvicorn (`kvplan serve`) know.
LogLevel = Literal["CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"]


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def default_database_url() -> str:
    """An SQLite file in the user's data folder (`$XDG_DATA_HOME/kvplan`, else
    `~/.local/share/kvplan`): the same file from any working folder, never one left in it."""
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(data_home).absolute() / 'kvplan' / 'kvplan.db'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KVPLAN_", extra="ignore", frozen=True)

    database_url: str = Field(
        default_factory=default_database_url,
        validation_alias=AliasChoices("DATABASE_URL", "KVPLAN_DATABASE_URL"),
        description="SQLAlchemy URL; default an SQLite file in the user's data folder "
        "(`$XDG_DATA_HOME/kvplan/kvplan.db`, else `~/.local/share/kvplan/kvplan.db`).",
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
    catalog_wait_after_write_seconds: float = Field(
        default=0.1,
        ge=0,
        description="How long the first read after this replica's own write waits for a refresh "
        "that shows it (a refresh takes milliseconds; a database slower than this is answered "
        "from the catalog held, which the TTL then refreshes). Bounds every read's wait while "
        "the database hangs right after a write.",
    )
    capacity_max_age_seconds: int = Field(
        default=30, ge=0, description="Cache-Control max-age of GET /v1/capacity answers."
    )
    log_level: Annotated[LogLevel, BeforeValidator(_upper)] = Field(
        default="INFO", description="Logging level name, in any case (`debug`, `INFO`, ...)."
    )
    db_connect_timeout_seconds: int = Field(
        default=2,
        ge=2,
        description="PostgreSQL connect_timeout: how long one connection attempt may take "
        "(libpq's minimum is 2).",
    )
    db_pool_size: int = Field(default=5, ge=1)
    db_pool_timeout_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How long a request waits for a free pooled connection before a 503.",
    )
    db_statement_timeout_seconds: float = Field(
        default=1.0,
        ge=0,
        description="PostgreSQL statement_timeout: the server cancels a statement running "
        "longer (0: none). Every kvplan statement reads or writes a few rows.",
    )
    db_answer_timeout_seconds: float = Field(
        default=1.5,
        ge=0,
        description="How long kvplan waits for any one answer from PostgreSQL before it drops "
        "the connection (0: forever). Covers a server too frozen to honour statement_timeout; "
        "keep it above db_statement_timeout_seconds.",
    )
    db_keepalives_idle_seconds: int = Field(
        default=30,
        ge=1,
        description="TCP keepalive idle time of PostgreSQL connections; a dead peer is noticed "
        "after this plus three probes a third of it apart.",
    )
    readiness_timeout_seconds: float = Field(
        default=1.0,
        gt=0,
        description="/readyz answers within this, 503 if the database has not answered by then.",
    )
    max_body_bytes: int = Field(
        default=1 << 20,
        ge=1,
        description="Largest request body accepted (bytes); larger ones get 413 unread.",
    )
    write_rate_per_second: float = Field(
        default=10.0,
        ge=0,
        description="Writes each admin token may make a second, on average, on each replica "
        "(each worker process); more get 429 with Retry-After (0: no limit).",
    )
    write_burst: int = Field(
        default=100,
        ge=1,
        description="Writes an admin token may make in a row before write_rate_per_second applies.",
    )
    cors_origins: str = Field(
        default="",
        description="Comma-separated origins allowed to call from a browser (CORS). Empty: none.",
    )

    # ---- the HTTP server (`kvplan serve`: uvicorn) ----
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Server processes (`kvplan serve --workers` overrides). One per CPU the "
        "replica is given; Kubernetes scales by replicas instead.",
    )
    loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto", description="Event loop; auto is uvloop (installed with kvplan)."
    )
    http: Literal["auto", "httptools", "h11"] = Field(
        default="auto", description="HTTP parser; auto is httptools (installed with kvplan)."
    )
    access_log_sample: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of answers below 400 written to the access log (0: none, 1: all); "
        "answers of 400 and above are always written.",
    )
    timeout_keep_alive_seconds: int = Field(
        default=5,
        ge=1,
        description="An idle keep-alive connection is closed after this.",
    )
    timeout_request_head_seconds: float = Field(
        default=10.0,
        ge=0,
        description="A request's line and headers must arrive within this of the connection "
        "opening or of the previous answer, else the connection is closed (slow loris; 0: no "
        "limit).",
    )
    timeout_request_body_seconds: float = Field(
        default=30.0,
        ge=0,
        description="A request's body must arrive within this of its head, else the connection "
        "is closed (0: no limit).",
    )
    limit_concurrency: int = Field(
        default=1024,
        ge=0,
        description="Connections or requests in flight per process beyond which new requests "
        "get 503 (0: no limit).",
    )
    timeout_graceful_shutdown_seconds: int = Field(
        default=20,
        ge=1,
        description="On SIGTERM, requests in flight get this long to finish; below the Helm "
        "chart's terminationGracePeriodSeconds (30) less its preStop sleep (5).",
    )
    h11_max_incomplete_event_bytes: int = Field(
        default=16384,
        ge=1024,
        description="Largest request head (line and headers), with either parser; the name "
        "is h11's, whose own limit it also sets.",
    )

    @cached_property
    def admin_token_list(self) -> tuple[str, ...]:
        tokens = self.admin_tokens.get_secret_value().split(",")
        return tuple(t.strip() for t in tokens if t.strip())

    @cached_property
    def read_key_list(self) -> tuple[str, ...]:
        keys = self.read_keys.get_secret_value().split(",")
        return tuple(k.strip() for k in keys if k.strip())

    @cached_property
    def cors_origin_list(self) -> tuple[str, ...]:
        return tuple(o.strip() for o in self.cors_origins.split(",") if o.strip())

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
