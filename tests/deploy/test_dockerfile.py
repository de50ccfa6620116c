"""Static checks of the Dockerfile and .dockerignore (no Docker engine needed).

The Dockerfile is parsed with the ``dockerfile`` package, which wraps BuildKit's own Go
parser, so line continuations, exec (JSON) forms and flags are read as `docker build`
reads them. Install it with the dev extras, or alone:

    pip install 'dockerfile==3.4.0'

When it is missing these tests FAIL rather than skip. The checks tie the image to the
rest of the repo: the ENTRYPOINT is the console script pyproject.toml declares, the
uid matches the Helm chart's runAsUser, the port matches the chart's containerPort,
and .dockerignore lets through everything `pip wheel .` needs.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
INSTALL_HINT = "pip install 'dockerfile==3.4.0'"


@dataclass
class Stage:
    base: str
    name: str | None
    commands: list[Any] = field(default_factory=list)

    def all(self, cmd: str) -> list[Any]:
        return [c for c in self.commands if c.cmd == cmd]

    def last(self, cmd: str) -> Any:
        found = self.all(cmd)
        assert found, f"stage {self.name or self.base} has no {cmd}"
        return found[-1]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for c in self.all("ENV"):
            pairs = c.value
            out.update(zip(pairs[::2], pairs[1::2], strict=True))
        return out


@pytest.fixture(scope="module")
def dockerfile_mod() -> ModuleType:
    try:
        import dockerfile  # noqa: PLC0415 - optional import with a clear failure
    except ImportError as exc:  # pragma: no cover - exercised only when not installed
        pytest.fail(f"Dockerfile parser missing ({exc}); install it with: {INSTALL_HINT}")
    return dockerfile


@pytest.fixture(scope="module")
def stages(dockerfile_mod: ModuleType) -> list[Stage]:
    commands = dockerfile_mod.parse_file(str(DOCKERFILE))
    args: dict[str, str] = {}
    out: list[Stage] = []
    for c in commands:
        if c.cmd == "ARG" and not out:
            name, _, default = c.value[0].partition("=")
            args[name] = default
        elif c.cmd == "FROM":
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m[1] or m[2]], c.value[0])
            name = c.value[2] if len(c.value) == 3 and c.value[1].upper() == "AS" else None
            out.append(Stage(base=base, name=name))
        else:
            assert out, f"{c.cmd} before the first FROM"
            out[-1].commands.append(c)
    return out


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


@pytest.fixture(scope="module")
def chart_values() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "helm" / "kvplan" / "values.yaml").read_text()))


def test_is_multi_stage_on_python_311_slim(stages: list[Stage], pyproject: dict[str, Any]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        assert stage.base == "python:3.11-slim"
    # The base image's Python must satisfy the package's requires-python.
    assert pyproject["project"]["requires-python"] == ">=3.11"


def test_build_stage_makes_a_wheel_and_the_final_stage_installs_it_offline(
    stages: list[Stage], final: Stage
) -> None:
    build_runs = " ".join(" ".join(c.value) for s in stages[:-1] for c in s.all("RUN"))
    assert "pip wheel" in build_runs
    final_runs = [" ".join(c.value) for c in final.all("RUN")]
    installs = [r for r in final_runs if "pip install" in r]
    assert len(installs) == 1
    (install,) = installs
    assert "--no-index" in install, "the runtime stage must not reach a package index"
    assert "/opt/venv" in install, "install into a virtualenv, not the system Python"
    assert "/opt/venv/bin" in final.env()["PATH"].split(":")[0]
    # The sources never reach the final image; only wheels (and Alembic files) do.
    for copy in final.all("COPY"):
        assert any(f.startswith("--from=") for f in copy.flags), copy.original


def test_no_network_fetches_in_the_image(stages: list[Stage], final: Stage) -> None:
    for stage in stages:
        for add in stage.all("ADD"):
            assert not any(v.startswith(("http://", "https://")) for v in add.value), add.original
    for run in final.all("RUN"):
        text = " ".join(run.value)
        assert not re.search(r"\b(curl|wget|apt-get)\b", text), run.original


def test_runs_as_a_numeric_non_root_user_matching_the_chart(
    final: Stage, chart_values: dict[str, Any]
) -> None:
    user = final.last("USER").value[0]
    uid, _, gid = user.partition(":")
    assert uid.isdigit(), "numeric uid, so Kubernetes runAsNonRoot can verify it"
    assert int(uid) == 10001
    assert gid == "" or int(gid) == 10001
    # USER is the final stage's last word on identity: nothing after it runs as root.
    last_user_line = final.last("USER").start_line
    assert all(c.start_line < last_user_line for c in final.all("RUN"))
    assert chart_values["podSecurityContext"]["runAsUser"] == int(uid)
    assert chart_values["podSecurityContext"]["runAsNonRoot"] is True


def test_exposes_8000_and_serves_there_like_the_chart(final: Stage) -> None:
    assert [v for c in final.all("EXPOSE") for v in c.value] == ["8000"]
    cmd = final.last("CMD")
    assert cmd.json, "exec form, so uvicorn is PID 1 and receives SIGTERM"
    assert list(cmd.value) == ["serve", "--host", "0.0.0.0", "--port", "8000"]
    deployment = (REPO / "helm" / "kvplan" / "templates" / "deployment.yaml").read_text()
    assert "containerPort: 8000" in deployment
    assert 'args: ["serve", "--host", "0.0.0.0", "--port", "8000"]' in deployment


def test_entrypoint_is_the_packaged_console_script(final: Stage, pyproject: dict[str, Any]) -> None:
    entry = final.last("ENTRYPOINT")
    assert entry.json
    assert list(entry.value) == ["kvplan"]
    assert "kvplan" in pyproject["project"]["scripts"]


def test_default_database_is_sqlite_on_a_writable_volume(final: Stage) -> None:
    url = final.env()["DATABASE_URL"]
    match = re.fullmatch(r"sqlite:///(/.+)/[^/]+\.db", url)
    assert match, url
    data_dir = match.group(1)
    volumes = [v for c in final.all("VOLUME") for v in c.value]
    assert data_dir in volumes
    # The directory is created for the runtime user (a root-owned volume is read-only to it).
    runs = " ".join(" ".join(c.value) for c in final.all("RUN"))
    assert re.search(rf"(-o 10001\b.*{re.escape(data_dir)}|chown[^&]*10001[^&]*{data_dir})", runs)


def test_healthcheck_probes_healthz(final: Stage) -> None:
    checks = final.all("HEALTHCHECK")
    if not checks:
        return
    (check,) = checks
    assert check.value[0] == "CMD"
    assert "http://127.0.0.1:8000/healthz" in " ".join(check.value)


# --- .dockerignore ---------------------------------------------------------------------------


def _dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """Translate .dockerignore lines the way BuildKit reads them.

    A pattern is cleaned (no leading or trailing slash), `**` spans directories, `*` and
    `?` do not, `!` re-includes, the last matching line wins, and a pattern that matches
    a directory applies to everything under it.
    """
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i : end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((negate, re.compile(regex)))
    return rules


def in_build_context(path: str) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for negate, regex in _dockerignore_rules():
        if any(regex.fullmatch(p) for p in prefixes):
            excluded = not negate
    return not excluded


def test_dockerignore_admits_what_the_wheel_build_needs(pyproject: dict[str, Any]) -> None:
    needed = ["pyproject.toml", "service/__init__.py", "migrations/env.py", "alembic.ini"]
    readme = pyproject["project"].get("readme")
    if isinstance(readme, str):
        needed.append(readme)
    needed += [
        str(p.relative_to(REPO))
        for p in (REPO / "service").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    assert [p for p in needed if not in_build_context(p)] == []


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".venv/bin/python",
        "tests/deploy/test_dockerfile.py",
        "helm/kvplan/values.yaml",
        "Dockerfile",
        "kvplan.db",
        "service/__pycache__/app.cpython-311.pyc",
        "service/catalog/data/local.db",
        "build/lib/service/__init__.py",
        "kvplan.egg-info/PKG-INFO",
    ],
)
def test_dockerignore_keeps_local_state_out_of_the_context(path: str) -> None:
    assert not in_build_context(path)
