"""`make bench`'s HTTP benchmark: kvplan served by `kvplan serve` beside a bare FastAPI route.

python -m bench.http [--duration S] [--rounds N] [--loadgen auto|wrk|python]

It serves kvplan (on SQLite, and on PostgreSQL where a server is reachable: a throwaway
database is made and dropped) and the baseline (`baseline.py`: one `async def` route returning
a constant dict) from this venv at the same server settings (`service/kit/server.py` `options()`),
drives them in turns (baseline, kvplan, baseline, kvplan, ...) with wrk where it is installed
or the Python load generator (`loadgen.py`), and prints the medians of the runs: requests per
second, p50 and p99 of GET /v1/capacity (one repeated question; questions never asked before),
of POST /v1/plans over the whole catalog and of the baseline, with the ratios; the kvplan
process's RSS after warm-up and after 100k more requests; and the time from start to the first
ready answer. The figures are printed, never asserted (the targets are issue 9's).
"""

from .run import Options, run

__all__ = ["Options", "run"]
