"""`kvplan` as people run it: the installed console script, from an empty folder.

Each command runs as a subprocess of the virtualenv's `kvplan` (pyproject's [project.scripts]),
in a fresh temporary folder with a fresh HOME and no DATABASE_URL, and the test reads what it
printed on stdout and stderr, its exit status, and what it left on disk (nothing, for the
reading commands). The answers are set against the HTTP doors' for the same question.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.cli import build_parser

KVPLAN = str(Path(sys.executable).parent / "kvplan")
MiB = 1 << 20
# Worked example A (../shared/design/engine-memory.md §1.7): Llama-3.1-8B on an H100, a pool of
# 28,006 blocks of 2 MiB (16 tokens x 32 layers x 8 KV heads x 128 x 2 x 2 B).
POOL = 28_006 * 2 * MiB
EXAMPLE_A = [
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100-sxm-80gb",
    "--max-model-len",
    "8192",
    "--engine-version",
    "0.20.0",
    "--kv-pool-bytes",
    str(POOL),
]
EXAMPLE_A_QUERY = (
    "model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=8192&engine_version=0.20.0"
    f"&kv_pool_bytes={POOL}"
)
# tests/planning/test_plan_latency_targets.py: one 8,192-token sequence of Llama-3.1-8B decodes
# in 8.7 ms a token on one H100, so a 5 ms target leaves no plan
NO_PLAN = ["--model", "llama-3.1-8b", "--max-model-len", "8192", "--peak-concurrency", "54"]
NO_PLAN += ["--gpu", "h100-sxm-80gb", "--max-gpus-per-node", "1", "--max-tpot-ms", "5"]
NO_PLAN += ["--engine-version", "0.20.0"]
NO_PLAN_QUERY = (
    "model=llama-3.1-8b&max_model_len=8192&peak_concurrency=54&gpus=h100-sxm-80gb"
    "&max_gpus_per_node=1&max_tpot_ms=5&engine_version=0.20.0"
)


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Shell:
    """An empty working folder and an empty HOME, and no database configured."""

    folder: Path
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k.upper() not in _DATABASE_VARIABLES}
        return {**env, "HOME": str(self.home), **extra}

    def run(self, *args: str, **extra: str) -> Run:
        done = subprocess.run(
            [KVPLAN, *args],
            check=False,  # the exit status is what the tests read
            cwd=self.folder,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    def left_behind(self) -> list[Path]:
        return [*self.folder.rglob("*"), *self.home.rglob("*")]


_DATABASE_VARIABLES = {"DATABASE_URL", "KVPLAN_DATABASE_URL", "XDG_DATA_HOME"}


@pytest.fixture
def shell(tmp_path: Path) -> Shell:
    (tmp_path / "work").mkdir()
    (tmp_path / "home").mkdir()
    return Shell(tmp_path / "work", tmp_path / "home")


def _without(problem: dict[str, object], *keys: str) -> dict[str, object]:
    return {k: v for k, v in problem.items() if k not in keys}


def test_version_is_the_installed_release(shell: Shell) -> None:
    run = shell.run("--version")
    assert (run.code, run.out, run.err) == (0, f"kvplan {version('kvplan')}\n", "")


def test_capacity_from_an_empty_folder_reads_the_shipped_catalog_and_leaves_nothing(
    shell: Shell,
) -> None:
    run = shell.run("capacity", *EXAMPLE_A)
    assert run.code == 0, run.err
    assert run.err == ""
    answer = json.loads(run.out)  # a pipe gets JSON: POST /v1/capacity's body
    # 28,006 blocks; 28,006 / cdiv(8,192, 16) = 54.70x; (28,006 - 1) // 512 = 54 sequences
    assert (answer["num_gpu_blocks"], answer["max_concurrency"]) == (28_006, 54.70)
    assert answer["max_num_seqs"] == 54
    assert answer["catalog_version"] == 0  # the shipped catalog, no database
    assert answer["explanation"] is None  # only with --explain
    assert shell.left_behind() == []


def test_capacity_as_csv_and_text_is_what_get_capacity_answers(
    shell: Shell, client: TestClient
) -> None:
    run = shell.run("capacity", *EXAMPLE_A, "--format", "csv")
    assert run.code == 0, run.err
    http = client.get(f"/v1/capacity?{EXAMPLE_A_QUERY}&format=csv")
    (mine,) = csv.DictReader(io.StringIO(run.out))
    (theirs,) = csv.DictReader(io.StringIO(http.text))
    # the same row but for the catalog's version: shipped (0) against the test database's
    assert _without(mine, "catalog_version") == _without(theirs, "catalog_version")
    assert list(mine) == list(theirs)
    text = shell.run("capacity", *EXAMPLE_A, "--format", "text")
    assert (text.code, text.out) == (0, "54\n")
    assert client.get(f"/v1/capacity?{EXAMPLE_A_QUERY}&format=text").text == "54"


def test_a_layout_that_does_not_fit_exits_1_with_get_capacitys_problem(
    shell: Shell, client: TestClient
) -> None:
    # Llama-3.1-70B's 141 GB of bf16 weights on one A100 40GB: no room for a KV cache
    run = shell.run("capacity", "--model", "llama-3.1-70b", "--gpu", "a100-40gb")
    assert run.code == 1
    answer = json.loads(run.out)  # POST /v1/capacity's answer: fits false, and why
    assert answer["fits"] is False
    assert answer["reason"].startswith("no memory left for the KV cache")
    problem = json.loads(run.err)
    http = client.get("/v1/capacity?model=llama-3.1-70b&gpu=a100-40gb")
    assert http.status_code == 422
    assert problem["type"] == "/problems/weights-do-not-fit"
    assert _without(problem, "instance") == _without(http.json(), "instance")
    assert problem["instance"] == "kvplan capacity"
    # as text or CSV, no 0 to read as an answer: nothing on stdout
    text = shell.run(
        "capacity", "--model", "llama-3.1-70b", "--gpu", "a100-40gb", "--format", "text"
    )
    assert (text.code, text.out) == (1, "")
    assert shell.left_behind() == []


def test_bad_input_exits_2_with_the_same_problem_as_http(shell: Shell, client: TestClient) -> None:
    run = shell.run("capacity", *EXAMPLE_A, "--kv-cache-dtype", "fp4")
    assert (run.code, run.out) == (2, "")
    problem = json.loads(run.err)
    http = client.get(f"/v1/capacity?{EXAMPLE_A_QUERY}&kv_cache_dtype=fp4").json()
    assert _without(problem, "instance") == _without(http, "instance")
    assert problem["field"] == "kv_cache_dtype"
    # a value pydantic refuses: the same validation problem as the query string's
    run = shell.run("capacity", *EXAMPLE_A[:4], "--max-model-len", "-5")
    http = client.get("/v1/capacity?model=llama-3.1-8b&gpu=h100-sxm-80gb&max_model_len=-5")
    assert run.code == 2
    assert _without(json.loads(run.err), "instance", "errors") == _without(
        http.json(), "instance", "errors"
    )


def test_argparse_refusals_are_problems_too(shell: Shell) -> None:
    run = shell.run("plan", "--model", "llama-3.1-8b")
    assert (run.code, run.out) == (2, "")
    problem = json.loads(run.err)
    assert problem["type"] == "/problems/invalid-request"
    assert problem["field"] == "max_model_len"
    assert "--max-model-len" in problem["detail"]
    # neither a peak nor a rate (issue 23: --peak-concurrency or --rate): refused by name
    neither = shell.run("plan", "--model", "llama-3.1-8b", "--max-model-len", "8192")
    assert neither.code == 2
    assert json.loads(neither.err)["field"] == "peak_concurrency"
    missing = shell.run("capacity", "--config", "no-such-config.json", "--gpu", "h100-sxm-80gb")
    assert missing.code == 2
    assert json.loads(missing.err)["field"] == "config"


def test_a_plan_with_no_option_exits_1_and_says_why_as_get_does(
    shell: Shell, client: TestClient
) -> None:
    run = shell.run("plan", *NO_PLAN, "--format", "text")
    assert run.code == 1
    assert run.out.startswith("no plan: h100-sxm-80gb x1: decode at 1 sequence takes 8.7 ms")
    assert run.out == client.get(f"/v1/plans?{NO_PLAN_QUERY}&format=text").text + "\n"
    as_json = shell.run("plan", *NO_PLAN)
    assert as_json.code == 1
    assert json.loads(as_json.out)["rejected"][0]["code"] == "tpot-over-target"


def test_a_plan_as_csv_is_get_plans_table(shell: Shell, client: TestClient) -> None:
    args = ["--model", "llama-3.1-8b", "--max-model-len", "8192", "--peak-concurrency", "32"]
    args += ["--gpu", "h100-sxm-80gb", "--engine-version", "0.20.0"]
    run = shell.run("plan", *args, "--format", "csv")
    assert run.code == 0, run.err
    query = "model=llama-3.1-8b&max_model_len=8192&peak_concurrency=32&gpus=h100-sxm-80gb"
    http = client.get(f"/v1/plans?{query}&engine_version=0.20.0&format=csv")
    assert run.out == http.text


def test_a_terminal_gets_a_table(shell: Shell) -> None:
    # stdout a pseudo-terminal, as in an interactive shell: the table, not 700 lines of JSON
    args = ["--model", "llama-3.1-8b", "--max-model-len", "8192", "--peak-concurrency", "32"]
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [KVPLAN, "plan", *args, "--gpu", "h100-sxm-80gb", "--engine-version", "0.20.0"],
        cwd=shell.folder,
        env=shell.env(),
        stdout=terminal,
        stderr=subprocess.PIPE,
    ) as process:
        os.close(terminal)
        printed = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal closed: the process is done writing
                break
            if not chunk:
                break
            printed += chunk
        assert process.wait(timeout=60) == 0
    os.close(controller)
    lines = printed.decode().splitlines()
    assert lines[0].startswith("llama-3.1-8b: max_model_len 8,192, peak_concurrency 32")
    assert lines[1].split()[:4] == ["rank", "gpu", "tensor_parallel_size", "replicas"]
    assert lines[2].split()[:2] == ["1", "h100-sxm-80gb"]
    assert any(line.startswith("vllm flags: --tensor-parallel-size 1") for line in lines)
    assert len(lines) < 30


def test_models_and_gpus_list_the_catalog_as_the_api_does(shell: Shell, client: TestClient) -> None:
    for what in ("models", "gpus"):
        run = shell.run(what, "--format", "csv")
        assert run.code == 0, run.err
        http = client.get(f"/v1/{what}?format=csv")
        assert run.out == http.text, what
        count = shell.run(what, "--format", "text")
        assert count.out == client.get(f"/v1/{what}?format=text").text + "\n"
        items = json.loads(shell.run(what).out)
        assert [item["slug"] for item in items] == [
            row["slug"] for row in csv.DictReader(io.StringIO(http.text))
        ]
    assert shell.left_behind() == []


def test_a_configured_database_is_read(shell: Shell, database_url: str) -> None:
    # the suite's database, migrated and seeded: its catalog version, not the shipped 0
    run = shell.run("capacity", *EXAMPLE_A, DATABASE_URL=database_url)
    assert run.code == 0, run.err
    assert json.loads(run.out)["catalog_version"] > 0
    offline = shell.run("capacity", *EXAMPLE_A, "--offline", DATABASE_URL=database_url)
    assert json.loads(offline.out)["catalog_version"] == 0


def test_an_unreachable_database_exits_3_with_a_503_problem(shell: Shell) -> None:
    # port 1 on this machine: nothing listens, the connection is refused at once
    down = "postgresql+psycopg://postgres@127.0.0.1:1/kvplan"
    for command in (["capacity", *EXAMPLE_A], ["gpus"]):
        run = shell.run(*command, DATABASE_URL=down)
        assert (run.code, run.out) == (3, ""), run.err
        problem = json.loads(run.err)
        assert (problem["status"], problem["type"]) == (503, "/problems/service-unavailable")
        assert "unreachable" in problem["detail"]


def test_migrate_and_seed_default_to_the_users_data_folder(shell: Shell) -> None:
    assert shell.run("migrate").code == 0
    seeded = shell.run("seed")
    assert seeded.code == 0, seeded.err
    assert "model:llama-3.1-8b" in json.loads(seeded.out)["added"]
    database = shell.home / ".local" / "share" / "kvplan" / "kvplan.db"
    assert database.is_file()
    assert list(shell.folder.iterdir()) == []  # nothing where it ran
    # XDG_DATA_HOME moves it, as the XDG base directory specification says
    data = shell.folder.parent / "data"
    assert shell.run("migrate", XDG_DATA_HOME=str(data)).code == 0
    assert (data / "kvplan" / "kvplan.db").is_file()


def test_every_option_has_help() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name, command in commands.items():
        for action in command._actions:
            if action.dest != "help":
                assert action.help, (name, action.option_strings or action.dest)
