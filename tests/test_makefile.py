"""`make run` installs the service alone; `make test` and `make lint` the dev tools too; both
share `.venv`, in either order (README "Two commands"). Read from what make would run
(`make -n`, a dry run) against a throwaway virtualenv folder holding the stamps."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNTIME_INSTALL = "pip install --quiet -e .\n"
DEV_INSTALL = 'pip install --quiet -e ".[dev]"'


def _dry_run(target: str, venv: Path) -> str:
    done = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A virtualenv folder whose python exists (make creates none) and no stamp yet."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").touch()
    return tmp_path


def test_a_fresh_make_run_installs_the_runtime_alone(venv: Path) -> None:
    planned = _dry_run("run", venv)
    assert RUNTIME_INSTALL in planned
    assert DEV_INSTALL not in planned
    assert "kvplan migrate" in planned
    assert "kvplan serve" in planned


def test_make_test_after_make_run_adds_the_dev_tools(venv: Path) -> None:
    (venv / ".runtime").touch()  # make run has installed the runtime
    planned = _dry_run("test", venv)
    assert DEV_INSTALL in planned
    assert RUNTIME_INSTALL not in planned


def test_make_run_after_make_test_installs_nothing(venv: Path) -> None:
    (venv / ".runtime").touch()  # make test's dev install touches both stamps
    (venv / ".installed").touch()
    assert "pip" not in _dry_run("run", venv)
    assert "pip" not in _dry_run("lint", venv)
