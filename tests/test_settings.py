"""Settings from the environment: a value kvplan cannot use fails at start, naming the variable."""

from __future__ import annotations

import logging
from typing import get_args

import pytest
import uvicorn.config
from pydantic import ValidationError

from service.kit.settings import LogLevel, Settings


def test_the_log_level_is_read_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_LOG_LEVEL", "debug")  # as the Helm chart's values may spell it
    assert Settings().log_level == "DEBUG"


def test_a_log_level_that_is_not_a_level_name_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KVPLAN_LOG_LEVEL", "verbose")
    with pytest.raises(ValidationError) as caught:
        Settings()
    assert [error["loc"] for error in caught.value.errors()] == [("log_level",)]


def test_every_log_level_is_known_to_logging_and_to_uvicorn() -> None:
    # app.py hands the level to logging.basicConfig, `kvplan serve` (cli.py) to uvicorn.run
    levels = set(get_args(LogLevel))
    assert levels <= set(logging.getLevelNamesMapping())
    assert {level.lower() for level in levels} <= set(uvicorn.config.LOG_LEVELS)
