"""Benchmark results (vllm bench serve, genai-perf) set against kvplan's speed estimate."""

from .parser import BenchRun, parse_result
from .service import BenchComparison, compare, explain_result

__all__ = ["BenchComparison", "BenchRun", "compare", "explain_result", "parse_result"]
