"""The HTTP benchmark's options, for `python -m bench.http` and `make bench`."""

from __future__ import annotations

import argparse
import os

from .run import SOAK_REQUESTS, Options


def options_from(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    return from_arguments(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=4.0, help="each measured run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--soak-requests", type=int, default=SOAK_REQUESTS)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("KVPLAN_BENCH_DATABASE_URL")
        or os.environ.get("KVPLAN_TEST_DATABASE_URL"),
        help="a PostgreSQL server to make a throwaway database on (default "
        "KVPLAN_BENCH_DATABASE_URL, then KVPLAN_TEST_DATABASE_URL)",
    )


def from_arguments(args: argparse.Namespace) -> Options:
    return Options(
        seconds=args.seconds,
        rounds=args.rounds,
        loadgen=args.loadgen,
        soak_requests=args.soak_requests,
        postgres_url=args.postgres_url or None,
        workers=args.workers,
    )
