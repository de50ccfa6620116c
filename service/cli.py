"""`kvplan`: the sizing answers from the shell, and serve, migrate and seed.

    kvplan capacity --model llama-3.1-8b --gpu h100-sxm-80gb --max-model-len 131072
    kvplan plan --model llama-3.1-70b --max-model-len 32768 --peak-concurrency 64 \\
                --kv-cache-dtype fp8
    kvplan models / kvplan gpus
    kubectl logs deploy/vllm | kvplan explain-log -
    kvplan migrate && kvplan seed && kvplan serve --host 0.0.0.0 --port 8000

Output (`cli_render`): a table at a terminal, JSON through a pipe; `--format json|csv|text|
table` chooses. Exit status: 0 the layout fits (capacity) or a plan was found; 1 it does not
fit, or no plan; 2 the question is refused (the problem, in the API's RFC 9457 shape, on
stderr); 3 the database could not be read.

The catalog: the reading commands use the database only when one is configured
(`DATABASE_URL` or `KVPLAN_DATABASE_URL`), else the shipped catalog, and write nothing where
they run. `serve`, `migrate` and `seed` default to an SQLite file in the user's data folder
(`settings.default_database_url`), creating the folder.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from .catalog import answers
from .catalog import service as catalog_service
from .catalog.records import gpu_row_from_record, model_row_from_record
from .catalog.seed import load_seed, offline_snapshot, seed_catalog
from .catalog.snapshot import CatalogCache, CatalogSnapshot
from .cli_options import CAPACITY_OPTIONS, PLAN_OPTIONS, SIMULATE_OPTIONS, add_options, given
from .cli_render import (
    FORMATS,
    OutputFormat,
    capacity_output,
    catalog_output,
    default_format,
    plan_output,
    simulation_output,
)
from .engine_logs import service as engine_logs
from .engine_logs import text as engine_log_text
from .kit import server
from .kit.db import Database, create_db_engine
from .kit.errors import (
    InvalidRequest,
    Problem,
    SequenceDoesNotFit,
    ServiceUnavailable,
    WeightsDoNotFit,
    schema_missing,
    sizing_problem,
    validation_problem,
)
from .kit.migrate import upgrade
from .kit.settings import Settings
from .planning import service as planning
from .planning.schemas import CapacityRequest, PlanRequestBody
from .planning.service import CapacityQuestion, PlanQuestion
from .simulation import Trace
from .simulations import service as simulations
from .simulations.schemas import SimulationRequest
from .sizing import SizingError
from .speed_results import service as speed_results
from .speed_results.schemas import SpeedResultAnswer

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_REFUSED, EXIT_UNAVAILABLE = 0, 1, 2, 3
# The largest catalog list, as GET /v1/gpus?format=csv answers it (catalog/router.py).
MAX_LISTED = 10_000


class _Parser(argparse.ArgumentParser):
    """argparse, whose refusals (an unknown option, a missing one) are problems too."""

    def error(self, message: str) -> NoReturn:
        flag = re.search(r"--([a-z0-9-]+)", message)
        field = flag.group(1).replace("-", "_") if flag else None
        detail = f"{message} (`{self.prog} --help` lists the options)"
        _print_problem(InvalidRequest(detail, field=field), self.prog)
        sys.exit(EXIT_REFUSED)


def _print_problem(problem: Problem, instance: str) -> None:
    indent = 2 if sys.stderr.isatty() else None
    print(json.dumps(problem.body(instance), indent=indent, default=str), file=sys.stderr)


def _database(settings: Settings) -> Database:
    return Database(create_db_engine(settings))


def _database_folder(settings: Settings) -> None:
    """Create the folder of an SQLite file (the default one is in the user's data folder)."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        Path(str(url.database)).parent.mkdir(parents=True, exist_ok=True)


def _database_configured(settings: Settings) -> bool:
    return "database_url" in settings.model_fields_set


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    _database_folder(settings)
    upgrade(settings.database_url, args.revision)
    print(f"migrated to {args.revision}", file=sys.stderr)
    return 0


def cmd_seed(settings: Settings, _args: argparse.Namespace) -> int:
    _database_folder(settings)
    database = _database(settings)
    with database.session() as session:
        report = seed_catalog(session)
        session.commit()
    summary = {
        "added": report.added,
        "refreshed": report.refreshed,
        "kept_user_edits": report.kept_user_edits,
        "kept_user_deletions": report.kept_user_deletions,
        "unchanged": report.unchanged,
    }
    print(json.dumps(summary, indent=2))
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    _database_folder(settings)
    server.serve(settings, host=args.host, port=args.port, workers=args.workers)
    return 0


def _offline(settings: Settings, args: argparse.Namespace) -> bool:
    return bool(args.offline) or not _database_configured(settings)


def _snapshot(settings: Settings, args: argparse.Namespace) -> CatalogSnapshot:
    if _offline(settings, args):
        return offline_snapshot()
    return CatalogCache(_database(settings), ttl_seconds=0).get()


def _read_json(path: str, option: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidRequest(f"cannot read {path}: {exc.strerror}", field=option) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            field=option,
        ) from exc


def _model_ref(args: argparse.Namespace) -> Any:
    if args.model_file:
        return _read_json(args.model_file, "model_file")
    if args.hf_config:
        ref: dict[str, Any] = {"hf_config": _read_json(args.hf_config, "config")}
        if args.num_parameters:
            ref["num_parameters"] = args.num_parameters
        if args.hf_quant_config:
            ref["hf_quant_config"] = _read_json(args.hf_quant_config, "hf_quant_config")
        return ref
    if args.hf_quant_config:
        raise InvalidRequest(
            "goes with --config: the hf_quant_config.json published beside that config.json",
            field="hf_quant_config",
        )
    return args.model


def _format(args: argparse.Namespace) -> OutputFormat:
    fmt: OutputFormat = args.format or default_format(sys.stdout)
    return fmt


def cmd_capacity(settings: Settings, args: argparse.Namespace) -> int:
    fields = given(args, CAPACITY_OPTIONS)
    memory_bytes = fields.pop("gpu_memory_bytes", None)
    if memory_bytes is not None:
        if "gpu" in fields:
            raise InvalidRequest("give either --gpu or --gpu-memory-bytes, not both", field="gpu")
        fields["gpu"] = {"memory_bytes": memory_bytes}
    body = CapacityRequest.model_validate(
        {"model": _model_ref(args), "explain": args.explain, **fields}
    )
    detail = planning.capacity(CapacityQuestion.from_body(body), _snapshot(settings, args))
    fmt = _format(args)
    # A layout that does not fit: POST's answer (fits false, the reason) for a person or a JSON
    # reader, never a bare 0 as a CSV row or a text value; then GET's problem, exit 1.
    if detail.fits or fmt in ("json", "table"):
        sys.stdout.write(capacity_output(detail, fmt))
    planning.require_fit(detail)
    return EXIT_FITS


def cmd_explain_bench(settings: Settings, args: argparse.Namespace) -> int:
    """POST /v1/speed-results from the shell: a benchmark's result file against kvplan's
    estimate of the same run, for the deployment the capacity options name."""
    fmt = _format(args)
    if fmt not in ("json", "table"):
        # POST /v1/speed-results answers JSON only: a csv or text would be the table misnamed
        raise InvalidRequest(
            f"explain-bench answers as table or json (POST /v1/speed-results' body), not {fmt}",
            field="format",
        )
    result = _read_json(args.file, "result")
    fields = given(args, CAPACITY_OPTIONS)
    memory_bytes = fields.pop("gpu_memory_bytes", None)
    if memory_bytes is not None:
        fields["gpu"] = {"memory_bytes": memory_bytes}
    body = CapacityRequest.model_validate({"model": _model_ref(args), **fields})
    question = CapacityQuestion.from_body(body)
    answer = speed_results.explain_result(
        result, question, _snapshot(settings, args), args.benchmark
    )
    if fmt == "json":
        print(answer.model_dump_json(indent=2))
    else:
        sys.stdout.write(_bench_table(answer))
    return 0


def _bench_table(answer: SpeedResultAnswer) -> str:
    """The run asked (or the only one) figure by figure; a report of several, one line each."""
    run = answer.run
    lines = []
    if run is not None:
        strategy = f" ({run.strategy})" if run.strategy else ""
        lines += [
            f"{run.tool}{strategy}: {run.completed or '?'} requests, "
            f"{run.mean_input_tokens:g} tokens in, {run.mean_output_tokens:g} out, "
            f"{run.concurrency:.2f} in flight",
            f"estimated at batch {run.batch}, {run.context_tokens} tokens of context each, "
            f"a {run.prompt_tokens}-token prefill",
            f"{'figure':<20}{'measured':>12}{'estimated':>12}{'ratio':>8}",
        ]
        for figure in answer.figures:
            cells = [_cell(value) for value in (figure.measured, figure.estimated, figure.ratio)]
            lines.append(f"{figure.name:<20}{cells[0]:>12}{cells[1]:>12}{cells[2]:>8}")
        if answer.estimate_unavailable:
            lines.append(f"no estimate: {answer.estimate_unavailable}")
    if len(answer.benchmarks) > 1:
        lines += _benchmarks_table(answer)
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _benchmarks_table(answer: SpeedResultAnswer) -> list[str]:
    """Each benchmark of a guidellm report: its batch, measured and estimated TPOT, ratio."""
    lines = [
        f"{len(answer.benchmarks)} benchmarks (--benchmark N shows one):",
        f"{'#':>3} {'strategy':<20}{'batch':>6}{'tpot_ms':>12}{'estimated':>12}{'ratio':>8}",
    ]
    for bench in answer.benchmarks:
        name = (bench.strategy or "?")[:19]
        if bench.run is None:
            lines.append(f"{bench.index:>3} {name:<20}not compared: {bench.not_compared}")
            continue
        tpot = next(f for f in bench.figures if f.name == "mean_tpot_ms")
        cells = [_cell(value) for value in (tpot.measured, tpot.estimated, tpot.ratio)]
        lines.append(
            f"{bench.index:>3} {name:<20}{bench.run.batch:>6}{cells[0]:>12}{cells[1]:>12}"
            f"{cells[2]:>8}"
        )
    return lines


def cmd_plan(settings: Settings, args: argparse.Namespace) -> int:
    fields = given(args, PLAN_OPTIONS)
    workload = _plan_workload(args)
    body = PlanRequestBody.model_validate(
        {"model": _model_ref(args), "explain": args.explain, **fields, **workload}
    )
    answer = planning.plan(PlanQuestion.from_body(body), _snapshot(settings, args))
    fmt = _format(args)
    sys.stdout.write(plan_output(answer, fmt))
    if fmt in ("csv", "text"):  # the plan's warnings, which HTTP puts in Kvplan-Warnings
        sys.stderr.write("".join(f"warning: {w}\n" for w in answer.warnings))
    return EXIT_FITS if answer.recommendation is not None else EXIT_DOES_NOT_FIT


def _plan_workload(args: argparse.Namespace) -> dict[str, Any]:
    """`kvplan plan --rate ...`: POST /v1/plans' workload, when a rate is given."""
    traffic = {
        "request_rate": args.request_rate,
        "input_tokens": _length(args.input_tokens, "input_tokens"),
        "output_tokens": _length(args.output_tokens, "output_tokens"),
        "num_requests": args.num_requests,
        "prefix_cache_hit_rate": args.prefix_cache_hit_rate,
        "seed": args.seed,
    }
    given_traffic = {name: value for name, value in traffic.items() if value is not None}
    return {"workload": given_traffic} if given_traffic else {}


def _plan_rate_args(parser: argparse.ArgumentParser) -> None:
    traffic = parser.add_argument_group("a plan for a rate (POST /v1/plans' workload)")
    traffic.add_argument(
        "--rate", "--request-rate", dest="request_rate", type=float,
        help="Poisson arrivals per second (instead of --peak-concurrency)",
    )  # fmt: skip
    traffic.add_argument("--input-tokens", help="a number, or JSON percentiles / histogram")
    traffic.add_argument("--output-tokens", help="a number, or JSON percentiles / histogram")
    traffic.add_argument("--num-requests", type=int, help="requests simulated per run (2000)")
    traffic.add_argument(
        "--prefix-cache-hit-rate", type=float, help="the share of each prompt all requests share"
    )
    traffic.add_argument("--seed", type=int, help="the random generator's seed (0)")


def _length(text: str | None, option: str) -> Any:
    """A length as the API takes it: a number, or JSON percentiles / histogram bins."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            'a number of tokens, JSON percentiles such as {"50": 2000, "99": 6000}, or '
            "histogram bins [[low, high, weight], ...]",
            field=option,
        ) from exc


def _simulation_traffic(args: argparse.Namespace) -> tuple[dict[str, Any], Trace | None]:
    """The workload's fields for the JSON body, or a trace file read in its own columns."""
    if args.trace:
        try:
            text = Path(args.trace).read_text(encoding="utf-8-sig")
        except OSError as exc:
            raise InvalidRequest(
                f"cannot read {args.trace}: {exc.strerror}", field="trace"
            ) from exc
        media = "application/jsonl" if args.trace.endswith((".jsonl", ".json")) else "text/csv"
        return {}, simulations.trace_of(text, media)
    workload = {
        "request_rate": args.request_rate,
        "max_concurrency": args.max_concurrency,
        "input_tokens": _length(args.input_tokens, "input_tokens"),
        "output_tokens": _length(args.output_tokens, "output_tokens"),
        "num_requests": args.num_requests,
        "duration_s": args.duration_s,
        "prefix_cache_hit_rate": args.prefix_cache_hit_rate,
        "seed": args.seed,
    }
    return {"workload": {k: v for k, v in workload.items() if v is not None}}, None


def cmd_simulate(settings: Settings, args: argparse.Namespace) -> int:
    fields = given(args, SIMULATE_OPTIONS)
    memory_bytes = fields.pop("gpu_memory_bytes", None)
    if memory_bytes is not None:
        fields["gpu"] = {"memory_bytes": memory_bytes}
    traffic_fields, trace = _simulation_traffic(args)
    targets = {
        name: getattr(args, name)
        for name in ("max_ttft_ms", "max_tpot_ms", "max_e2e_latency_ms")
        if getattr(args, name) is not None
    }
    body = SimulationRequest.model_validate(
        {
            "model": _model_ref(args),
            **fields,
            **traffic_fields,
            **({"targets": targets} if targets else {}),
        }
    )
    traffic = trace if trace is not None else simulations.traffic_of(body)
    answer = simulations.simulation(
        CapacityQuestion.from_body(body),
        traffic,
        simulations.targets_of(body.targets),
        _snapshot(settings, args),
    )
    sys.stdout.write(simulation_output(answer, _format(args)))
    return EXIT_FITS


@dataclass(frozen=True, slots=True)
class _Listing:
    """One catalog list as `kvplan models` / `kvplan gpus` print it: where its rows come from
    (the shipped file offline, the catalog's use case otherwise) and how GET renders them."""

    seed_file: str
    from_record: Callable[[dict[str, Any], str], Any]
    from_database: Callable[..., tuple[Sequence[Any], Any]]
    read: Callable[[Any], Any]
    csv_row: Callable[[Any], Any]
    csv_columns: Sequence[str]
    table_columns: tuple[str, ...]


_GPUS = _Listing(
    "gpus.json",
    gpu_row_from_record,
    catalog_service.list_gpus,
    answers.gpu_read,
    answers.gpu_csv_row,
    answers.GPU_CSV_COLUMNS,
    ("slug", "name", "memory_gib", "memory_type", "fp8_support", "price_usd_per_hour"),
)
_MODELS = _Listing(
    "models.json",
    model_row_from_record,
    catalog_service.list_models,
    answers.model_read,
    answers.model_csv_row,
    answers.MODEL_CSV_COLUMNS,
    ("slug", "hf_id", "num_layers", "layer_kinds", "max_position_embeddings", "weight_gib"),
)


def _list_catalog(settings: Settings, args: argparse.Namespace, listing: _Listing) -> int:
    if _offline(settings, args):
        rows: Sequence[Any] = [listing.from_record(r, "seed") for r in load_seed(listing.seed_file)]
    else:
        with _database(settings).session() as session:
            rows, _ = listing.from_database(session, limit=MAX_LISTED, cursor=None)
    # through the answer model, as GET reads them: a shipped `312` is the column's `312.0`
    reads = [listing.read(row) for row in sorted(rows, key=lambda row: str(row.slug))]
    sys.stdout.write(
        catalog_output(
            [read.model_dump(mode="json") for read in reads],
            [listing.csv_row(read) for read in reads],
            listing.csv_columns,
            _format(args),
            listing.table_columns,
        )
    )
    return 0


def cmd_gpus(settings: Settings, args: argparse.Namespace) -> int:
    return _list_catalog(settings, args, _GPUS)


def cmd_models(settings: Settings, args: argparse.Namespace) -> int:
    return _list_catalog(settings, args, _MODELS)


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
        hf_config=_read_json(args.hf_config, "hf_config") if args.hf_config else None,
    )
    answer = engine_logs.explain_log(question, _snapshot(settings, args))
    if args.json:
        print(json.dumps(engine_logs.answer_json(answer), indent=2))
    else:
        sys.stdout.write(engine_log_text.render(answer))
    return 0


_OFFLINE_HELP = (
    "use the shipped catalog even where DATABASE_URL is set (without DATABASE_URL it is always "
    "the shipped catalog)"
)
_FORMAT_HELP = (
    "table (the default at a terminal), json (the default otherwise: the API's JSON body), "
    "csv (the API's CSV table) or text (the API's format=text value)"
)


def _reading_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=FORMATS, help=_FORMAT_HELP)
    parser.add_argument("--offline", action="store_true", help=_OFFLINE_HELP)


def _model_args(parser: argparse.ArgumentParser) -> None:
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="catalog model slug, e.g. llama-3.1-8b (kvplan models)")
    model.add_argument("--model-file", help="a JSON file with an inline architecture")
    model.add_argument(
        "--config",
        "--hf-config",
        dest="hf_config",
        help="a Hugging Face config.json as published, for a model the catalog lacks",
    )
    parser.add_argument(
        "--num-parameters", help="with --config: the parameter count, to price the weights"
    )
    parser.add_argument(
        "--hf-quant-config",
        help="with --config: the hf_quant_config.json beside it (ModelOpt NVFP4 / FP8), read as "
        "vLLM reads it",
    )
    parser.add_argument(
        "--explain",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="add the step-by-step explanation to the JSON (off by default)",
    )
    _reading_args(parser)


def _explain_log_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the start-up log; - reads standard input")
    parser.add_argument("--engine", help="vllm, sglang or trtllm (default: from the log)")
    parser.add_argument("--engine-version", help="when the log prints none")
    parser.add_argument("--model", help="catalog slug (default: the model the log names)")
    parser.add_argument("--hf-config", help="a config.json, for a model the catalog lacks")
    parser.add_argument("--gpu", help="catalog slug (default: by the total the log prints)")
    parser.add_argument("--json", action="store_true", help="print POST /v1/engine-logs' body")
    parser.add_argument("--offline", action="store_true", help=_OFFLINE_HELP)
    parser.set_defaults(run=cmd_explain_log)


def _simulate_args(parser: argparse.ArgumentParser) -> None:
    traffic = parser.add_argument_group("traffic (POST /v1/simulations' workload, or --trace)")
    traffic.add_argument("--request-rate", type=float, help="Poisson arrivals per second")
    traffic.add_argument("--max-concurrency", type=int, help="a closed loop of this many clients")
    traffic.add_argument("--input-tokens", help="a number, or JSON percentiles / histogram")
    traffic.add_argument("--output-tokens", help="a number, or JSON percentiles / histogram")
    traffic.add_argument("--num-requests", type=int, help="how many requests (or --duration-s)")
    traffic.add_argument("--duration-s", type=float, help="Poisson arrivals for this long")
    traffic.add_argument(
        "--prefix-cache-hit-rate", type=float, help="the share of each prompt all requests share"
    )
    traffic.add_argument("--seed", type=int, help="the random generator's seed (0)")
    traffic.add_argument(
        "--trace",
        help="a trace file: CSV in Azure's, BurstGPT's or kvplan's columns, or Mooncake's "
        "JSON lines (.jsonl)",
    )
    for name, what in (
        ("max_ttft_ms", "time to first token"),
        ("max_tpot_ms", "time per output token"),
        ("max_e2e_latency_ms", "end-to-end latency"),
    ):
        traffic.add_argument(
            "--" + name.replace("_", "-"), dest=name, type=float, help=f"goodput's {what} target"
        )


def _server_commands(sub: Any) -> None:
    migrate = sub.add_parser("migrate", help="apply the database migrations (DATABASE_URL)")
    migrate.add_argument("--revision", default="head", help="Alembic revision to reach (head)")
    migrate.set_defaults(run=cmd_migrate)
    seed = sub.add_parser("seed", help="add the shipped catalog; never overwrites user edits")
    seed.set_defaults(run=cmd_seed)
    serve = sub.add_parser("serve", help="serve the HTTP API in the foreground")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    serve.add_argument("--workers", type=int, help="server processes (KVPLAN_WORKERS, 1)")
    serve.set_defaults(run=cmd_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kvplan",
        description="How many requests fit in a GPU's KV cache: capacity and plans for vLLM, "
        "SGLang and TensorRT-LLM.",
        epilog="Exit status: 0 fits, 1 does not fit (or no plan), 2 refused input, 3 database "
        "unreachable. Problems are printed to stderr as the API's RFC 9457 JSON.",
    )
    parser.add_argument("--version", action="version", version=f"kvplan {version('kvplan')}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    capacity = sub.add_parser("capacity", help="one deployment: max_num_seqs and the KV pool")
    _model_args(capacity)
    add_options(capacity, CAPACITY_OPTIONS, CapacityRequest)
    capacity.set_defaults(run=cmd_capacity)
    bench = sub.add_parser(
        "explain-bench",
        help="a benchmark's result file (vllm bench serve --save-result, genai-perf, guidellm) "
        "against "
        "kvplan's estimate of the same run",
    )
    bench.add_argument("file", help="the result file, as the tool wrote it")
    bench.add_argument(
        "--benchmark",
        type=int,
        help="of a guidellm report of several benchmarks, the one to show (its index, from 0)",
    )
    _model_args(bench)
    add_options(bench, CAPACITY_OPTIONS, CapacityRequest)
    bench.set_defaults(run=cmd_explain_bench)
    plan = sub.add_parser("plan", help="the cheapest GPU plan for a peak of sequences")
    _model_args(plan)
    add_options(plan, PLAN_OPTIONS, PlanRequestBody)
    _plan_rate_args(plan)
    plan.set_defaults(run=cmd_plan)
    simulate = sub.add_parser(
        "simulate", help="one replica under traffic: TTFT, TPOT and latency percentiles"
    )
    _model_args(simulate)
    add_options(simulate, SIMULATE_OPTIONS, SimulationRequest)
    _simulate_args(simulate)
    simulate.set_defaults(run=cmd_simulate)
    for name, run, what in (("models", cmd_models, "models"), ("gpus", cmd_gpus, "GPUs")):
        listing = sub.add_parser(name, help=f"the catalog's {what}")
        _reading_args(listing)
        listing.set_defaults(run=run)
    _explain_log_args(
        sub.add_parser(
            "explain-log", help="an engine's start-up log: its figures against kvplan's prediction"
        )
    )
    _server_commands(sub)
    return parser


def _answer(settings: Settings, args: argparse.Namespace) -> tuple[int, Problem | None]:
    """The command's exit status, or the problem it raised and the status that goes with it."""
    try:
        code: int = args.run(settings, args)
    except (WeightsDoNotFit, SequenceDoesNotFit) as problem:
        return EXIT_DOES_NOT_FIT, problem
    except ValidationError as exc:
        return EXIT_REFUSED, validation_problem(exc)
    except SizingError as exc:
        return EXIT_REFUSED, sizing_problem(exc)
    except Problem as problem:
        return EXIT_REFUSED, problem
    except (OperationalError, DBAPIError) as exc:
        if schema_missing(exc):
            detail = "the database schema is not migrated: run `kvplan migrate`"
        else:
            detail = f"the database is unreachable ({type(exc.orig).__name__})"
        return EXIT_UNAVAILABLE, ServiceUnavailable(detail)
    return code, None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings()
    code, problem = _answer(settings, args)
    if problem is not None:
        _print_problem(problem, "kvplan " + args.command)
    return code
