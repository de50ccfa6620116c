"""Benchmark results (vllm bench serve, genai-perf) set against kvplan's speed estimate, and
kept as speed calibrations. The catalog snapshot reads this package's table, so this module
imports nothing: callers import `parser`, `service`, `calibrations` by name."""
