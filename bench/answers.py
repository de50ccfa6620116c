"""The benchmark's questions answered in process, one line per answer: did a change move any?

`python -m bench.answers --write FILE` asks every question and writes, per answer, the
question, the HTTP status, the content type and the SHA-256 of the body; `--check FILE` asks
them again and fails (exit 1, the first differences printed) when any line differs. Issue 18's
"byte-identical before and after" is `--write` on the old tree and `--check` on the new one.

The questions: the 6,000 varied GET /v1/capacity questions of `make bench`
(`bench/http/workloads.py` `varied`) in JSON and as `format=csv`, `tsv`, `text` and
`prometheus`; the first `--explained` of them (300) as POST /v1/capacity with the explanation,
and as three GET questions it refuses (an unknown model, a context too long, no GPUs);
and plans (POST /v1/plans explained, GET /v1/plans as CSV) for every model of the catalog at
three context lengths. The app is the one `kvplan serve` builds (`service.app.create_app`),
on a throwaway SQLite catalog that `kvplan migrate` and `kvplan seed` write, driven by
Starlette's TestClient: no socket, the same middleware.

An explanation cites the source file of its rules: where a change moved that file, `--renamed
NEW=OLD` reads the new path as the old one, so that the check shows nothing else moved.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi.testclient import TestClient

from service.app import create_app
from service.catalog.seed import offline_snapshot

VARIANTS = ("", "&format=csv", "&format=tsv", "&format=text", "&format=prometheus")
PLAN_LENGTHS = (4096, 32768, 131072)


def _workloads() -> Any:
    """`bench.http.workloads`, or where a tree before issue 18 kept it (the script can be copied
    into an older checkout and run there as `python answers.py --write FILE`)."""
    for name in ("bench.http.workloads", "service.bench_http.workloads"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise SystemExit("no benchmark workloads in this tree")


def questions(explained: int) -> Iterator[tuple[str, str, bytes | None]]:
    """(method, target, JSON body or None) for every question, in a fixed order."""
    workloads = _workloads()
    varied = workloads.varied()
    for request in varied:
        for variant in VARIANTS:
            yield "GET", request.target + variant, None
    for number, request in enumerate(varied[:explained]):
        params = dict(parse_qsl(urlsplit(request.target).query))
        body = {k: (int(v) if v.isdigit() else v) for k, v in params.items()}
        yield "POST", "/v1/capacity", json.dumps({**body, "explain": True}).encode()
        # Refusals too: a model the catalog lacks, a context no GPU holds, a field misspelt.
        refused = (
            {**params, "model": f"no-such-model-{number}"},
            {**params, "max_model_len": str(10**7 + number)},
            {**params, "tensor_parallel_size": "0"},
        )
        for asked in refused:
            yield "GET", "/v1/capacity?" + urlencode(asked), None
    models = sorted(offline_snapshot().models)
    for model in models:
        for length in PLAN_LENGTHS:
            plan = {"model": model, "max_model_len": length, "peak_concurrency": 64}
            yield "POST", "/v1/plans", json.dumps({**plan, "explain": True}).encode()
            yield "GET", "/v1/plans?" + urlencode({**plan, "format": "csv"}), None


def answers(explained: int, renamed: dict[bytes, bytes] | None = None) -> Iterator[str]:
    """One line per answer: method, target, body digest of the question; status, type, digest."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "KVPLAN_DATABASE_URL": f"sqlite:///{tmp}/answers.db",
            "KVPLAN_LOG_LEVEL": "WARNING",
        }
        os.environ.update(env)
        kvplan = str(Path(sys.executable).with_name("kvplan"))
        for command in ("migrate", "seed"):
            subprocess.run([kvplan, command], env=env, check=True, capture_output=True)
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        logging.getLogger("httpx").setLevel(logging.WARNING)
        logging.getLogger("kvplan.access").setLevel(logging.ERROR)
        with TestClient(create_app()) as client:
            for method, target, body in questions(explained):
                headers = {"content-type": "application/json"} if body else {}
                answer = client.request(method, target, content=body, headers=headers)
                asked = hashlib.sha256(body).hexdigest()[:16] if body else "-"
                content = answer.content
                for new, old in (renamed or {}).items():
                    content = content.replace(new, old)
                digest = hashlib.sha256(content).hexdigest()
                kind = answer.headers.get("content-type", "-")
                yield f"{method} {target} {asked}\t{answer.status_code}\t{kind}\t{digest}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="write the answers' digests to FILE")
    mode.add_argument("--check", type=Path, help="compare with FILE; exit 1 on any difference")
    parser.add_argument("--explained", type=int, default=300, help="POST details (default 300)")
    parser.add_argument(
        "--renamed",
        action="append",
        default=[],
        metavar="NEW=OLD",
        help="read NEW as OLD in every answer before its digest: a source path an explanation "
        "cites that moved (repeatable)",
    )
    args = parser.parse_args(argv)
    renamed = dict(pair.encode().split(b"=", 1) for pair in args.renamed)
    lines = list(answers(args.explained, renamed))
    if args.write:
        args.write.write_text("\n".join(lines) + "\n")
        print(f"{len(lines)} answers written to {args.write}")
        return 0
    before = args.check.read_text().splitlines()
    differ = [(a, b) for a, b in zip(before, lines, strict=False) if a != b]
    print(f"{len(lines)} answers, {len(before)} before; {len(differ)} differ")
    for a, b in differ[:10]:
        print(f"- {a}\n+ {b}")
    return 1 if differ or len(before) != len(lines) else 0


if __name__ == "__main__":
    sys.exit(main())
