"""`kvplan`: serve, migrate, seed, and the sizing engine from the shell (JSON out).

    kvplan migrate
    kvplan seed
    kvplan serve --host 0.0.0.0 --port 8000
    kvplan plan --model llama-3.1-70b --max-model-len 32768 --peak-concurrency 64 \\
                --kv-cache-dtype fp8
    kvplan capacity --model llama-3.1-8b --gpu h100-sxm-80gb --max-model-len 131072
    kubectl logs deploy/vllm | kvplan explain-log - --json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import server
from .catalog.seed import offline_snapshot, seed_catalog
from .catalog.snapshot import CatalogCache, CatalogSnapshot
from .db import Database, create_db_engine
from .engine_logs import service as engine_logs
from .engine_logs import text as engine_log_text
from .errors import InvalidRequest, Problem, sizing_problem
from .migrate import upgrade
from .planning import service as planning
from .planning.schemas import CapacityRequest, PlanRequestBody
from .planning.service import CapacityQuestion, PlanQuestion
from .settings import Settings
from .sizing import SizingError


def _database(settings: Settings) -> Database:
    return Database(create_db_engine(settings))


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    upgrade(settings.database_url, args.revision)
    print(f"migrated to {args.revision}", file=sys.stderr)
    return 0


def cmd_seed(settings: Settings, _args: argparse.Namespace) -> int:
    database = _database(settings)
    with database.session() as session:
        report = seed_catalog(session)
        session.commit()
    print(
        json.dumps(
            {
                "added": report.added,
                "refreshed": report.refreshed,
                "kept_user_edits": report.kept_user_edits,
                "kept_user_deletions": report.kept_user_deletions,
                "unchanged": report.unchanged,
            },
            indent=2,
        )
    )
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    server.serve(settings, host=args.host, port=args.port, workers=args.workers)
    return 0


def _snapshot(settings: Settings, offline: bool) -> CatalogSnapshot:
    if offline:
        return offline_snapshot()
    return CatalogCache(_database(settings), ttl_seconds=0).get()


def _model_ref(args: argparse.Namespace) -> Any:
    if args.model_file:
        return json.loads(Path(args.model_file).read_text())
    if args.hf_config:
        ref: dict[str, Any] = {"hf_config": json.loads(Path(args.hf_config).read_text())}
        if args.num_parameters:
            ref["num_parameters"] = args.num_parameters
        return ref
    return args.model


def _engine_fields(args: argparse.Namespace) -> dict[str, Any]:
    fields = {
        "engine": args.engine,
        "engine_version": args.engine_version,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "max_num_batched_tokens": args.max_num_batched_tokens,
        "max_num_seqs": args.max_num_seqs,
        "block_size": args.block_size,
        "kv_pool_bytes": args.kv_pool_bytes,
    }
    return {k: v for k, v in fields.items() if v is not None}


def cmd_plan(settings: Settings, args: argparse.Namespace) -> int:
    # An option left out takes the API's default (the same answer as POST /v1/plans).
    asked = {
        "model": _model_ref(args),
        "max_model_len": args.max_model_len,
        "peak_concurrency": args.peak_concurrency,
        "kv_cache_dtype": args.kv_cache_dtype,
        "gpus": args.gpu or None,
        "max_gpus_per_node": args.max_gpus_per_node,
        "headroom_fraction": args.headroom_fraction,
        "avg_context_tokens": args.avg_context_tokens,
        "avg_prompt_tokens": args.avg_prompt_tokens,
        "max_tpot_ms": args.max_tpot_ms,
        "max_ttft_ms": args.max_ttft_ms,
        "min_output_tokens_per_second_per_user": args.min_output_tokens_per_second_per_user,
        "rank_by": args.rank_by,
        "max_alternatives": args.max_alternatives,
        "explain": not args.no_explain,
        **_engine_fields(args),
    }
    body = PlanRequestBody.model_validate({k: v for k, v in asked.items() if v is not None})
    answer = planning.plan(PlanQuestion.from_body(body), _snapshot(settings, args.offline))
    print(answer.model_dump_json(indent=2))
    return 0 if answer.recommendation is not None else 3


def cmd_capacity(settings: Settings, args: argparse.Namespace) -> int:
    gpu: Any = args.gpu if args.gpu else {"memory_bytes": args.gpu_memory_bytes or 0}
    body = CapacityRequest.model_validate(
        {
            "model": _model_ref(args),
            "gpu": gpu,
            "max_model_len": args.max_model_len,
            "kv_cache_dtype": args.kv_cache_dtype,
            "tensor_parallel_size": args.tensor_parallel_size,
            "pipeline_parallel_size": args.pipeline_parallel_size,
            "avg_prompt_tokens": args.avg_prompt_tokens,
            "explain": not args.no_explain,
            **_engine_fields(args),
        }
    )
    detail = planning.capacity(CapacityQuestion.from_body(body), _snapshot(settings, args.offline))
    print(detail.model_dump_json(indent=2))
    return 0


def cmd_explain_log(settings: Settings, args: argparse.Namespace) -> int:
    """POST /v1/engine-logs from the shell: the same use case, a table or the API's body."""
    if args.file == "-":
        log = sys.stdin.read()
    else:
        try:
            log = Path(args.file).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InvalidRequest(f"cannot read {args.file}: {exc.strerror}", field="file") from exc
    question = engine_logs.LogQuestion(
        log=log,
        engine=args.engine,
        engine_version=args.engine_version,
        model=args.model,
        gpu=args.gpu,
        hf_config=json.loads(Path(args.hf_config).read_text()) if args.hf_config else None,
    )
    answer = engine_logs.explain_log(question, _snapshot(settings, args.offline))
    if args.json:
        print(json.dumps(engine_logs.answer_json(answer), indent=2))
    else:
        sys.stdout.write(engine_log_text.render(answer))
    return 0


def _explain_log_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the start-up log; - reads standard input")
    parser.add_argument("--engine", help="vllm, sglang or trtllm (default: from the log)")
    parser.add_argument("--engine-version", help="when the log prints none")
    parser.add_argument("--model", help="catalog slug (default: the model the log names)")
    parser.add_argument("--hf-config", help="a config.json, for a model the catalog lacks")
    parser.add_argument("--gpu", help="catalog slug (default: by the total the log prints)")
    parser.add_argument("--json", action="store_true", help="print POST /v1/engine-logs' body")
    parser.add_argument(
        "--offline", action="store_true", help="use the shipped catalog, not the database"
    )
    parser.set_defaults(run=cmd_explain_log)


def _sizing_args(parser: argparse.ArgumentParser) -> None:
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="catalog slug")
    model.add_argument("--model-file", help="JSON file with an inline architecture")
    model.add_argument(
        "--config", "--hf-config", dest="hf_config", help="a config.json as published"
    )
    parser.add_argument("--num-parameters", type=int)
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--avg-prompt-tokens", type=int, help="prompt length prefill_ms times")
    parser.add_argument("--kv-cache-dtype", default="auto")
    parser.add_argument("--engine", default="vllm", choices=["vllm", "sglang", "trtllm"])
    parser.add_argument("--engine-version")
    parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--max-num-batched-tokens", type=int)
    parser.add_argument("--max-num-seqs", type=int)
    parser.add_argument("--block-size", type=int)
    parser.add_argument("--kv-pool-bytes", type=int)
    parser.add_argument("--no-explain", action="store_true")
    parser.add_argument(
        "--offline", action="store_true", help="use the shipped catalog, not the database"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvplan", description="KV-cache capacity planning.")
    sub = parser.add_subparsers(dest="command", required=True)
    migrate = sub.add_parser("migrate", help="apply Alembic migrations (DATABASE_URL)")
    migrate.add_argument("--revision", default="head")
    migrate.set_defaults(run=cmd_migrate)
    seed = sub.add_parser("seed", help="add the shipped catalog; never overwrites user edits")
    seed.set_defaults(run=cmd_seed)
    serve = sub.add_parser("serve", help="serve the API in the foreground")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, help="default: KVPLAN_WORKERS (1)")
    serve.set_defaults(run=cmd_serve)
    plan = sub.add_parser("plan", help="the cheapest GPU plan, as JSON")
    _sizing_args(plan)
    plan.add_argument("--peak-concurrency", type=int, required=True)
    plan.add_argument("--gpu", action="append", help="candidate GPU slug (repeatable)")
    plan.add_argument("--max-gpus-per-node", type=int)
    plan.add_argument(
        "--headroom-fraction", type=float, help="share of the KV blocks kept free (default 0.1)"
    )
    plan.add_argument("--rank-by", choices=["cost", "gpu_count", "tokens_per_dollar"])
    plan.add_argument("--max-alternatives", type=int, help="options shown (default 10)")
    plan.add_argument("--avg-context-tokens", type=int)
    plan.add_argument("--max-tpot-ms", type=float, help="latency target: ms per output token")
    plan.add_argument("--max-ttft-ms", type=float, help="latency target: ms to prefill a prompt")
    plan.add_argument("--min-output-tokens-per-second-per-user", type=float)
    plan.set_defaults(run=cmd_plan)
    capacity = sub.add_parser("capacity", help="one deployment's capacity, as JSON")
    _sizing_args(capacity)
    capacity.add_argument("--gpu")
    capacity.add_argument("--gpu-memory-bytes", type=int)
    capacity.add_argument("--tensor-parallel-size", type=int, default=1)
    capacity.add_argument("--pipeline-parallel-size", type=int, default=1)
    capacity.set_defaults(run=cmd_capacity)
    _explain_log_args(
        sub.add_parser(
            "explain-log",
            help="an engine's start-up log: its figures against kvplan's prediction",
        )
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    try:
        code: int = args.run(settings, args)
    except ValidationError as exc:
        print(
            json.dumps({"status": 422, "errors": exc.errors(include_url=False)}, default=str),
            file=sys.stderr,
        )
        return 2
    except SizingError as exc:
        print(json.dumps(sizing_problem(exc).body("kvplan " + args.command)), file=sys.stderr)
        return 2
    except Problem as exc:
        print(json.dumps(exc.body("kvplan " + args.command)), file=sys.stderr)
        return 2
    return code
