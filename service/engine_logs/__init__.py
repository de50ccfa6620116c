"""Engine start-up logs: read what vLLM, SGLang and TensorRT-LLM print about their memory.

The parser (`model`, `clean`, `patterns`, `parser`) is pure and typed: standard library only
(and `service.sizing.errors` for the error type), no web or database imports.
`parse_engine_log(text)` answers a `ParsedLog`. Around it, the slice that answers
POST /v1/engine-logs: `schemas`, `service` (the use case, which sets the log against the
planning use case's prediction) and `router`. The parser, which compiles every pattern, is
imported with the first log read: the app imports this package for its tables only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model import Figure, ParsedLog, RankValue, RecognisedLine, Reported, Settings

if TYPE_CHECKING:
    from .parser import LogNotRecognised, parse_engine_log

__all__ = [
    "Figure",
    "LogNotRecognised",
    "ParsedLog",
    "RankValue",
    "RecognisedLine",
    "Reported",
    "Settings",
    "parse_engine_log",
]


def __getattr__(name: str) -> Any:
    if name in ("LogNotRecognised", "parse_engine_log"):
        from . import parser  # noqa: PLC0415

        return getattr(parser, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
