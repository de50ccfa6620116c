"""Engine start-up logs: read what vLLM, SGLang and TensorRT-LLM print about their memory.

Pure and typed: standard library only (and `service.sizing.errors` for the error type), no web
or database imports. `parse_engine_log(text)` answers a `ParsedLog`.
"""

from .model import Figure, ParsedLog, RankValue, RecognisedLine, Reported, Settings
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
