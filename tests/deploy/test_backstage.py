"""catalog-info.yaml as a Backstage catalog reads it, checked by @backstage/catalog-model.

The checks run in Node with the package's own validators (tests/deploy/backstage/validate.mjs:
the default entity policies, then the built-in kind validators, after resolving `$text` the
way the catalog's placeholder processor does). The package comes from the npm registry, pinned
by tests/deploy/backstage/package-lock.json; the first run installs it (`npm ci`, as .ci/run
does). Without node and npm these tests fail rather than skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "tests" / "deploy" / "backstage"
CATALOG_FILE = REPO / "catalog-info.yaml"
SPEC_FILE = REPO / "openapi" / "openapi.json"


def _installed_version() -> str | None:
    manifest = CHECKER / "node_modules" / "@backstage" / "catalog-model" / "package.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text())["version"])


@pytest.fixture(scope="module")
def node() -> str:
    """Node, with the pinned @backstage/catalog-model installed beside validate.mjs."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed: apt-get install nodejs npm (.ci/run does)")
    lock = json.loads((CHECKER / "package-lock.json").read_text())
    pinned = lock["packages"]["node_modules/@backstage/catalog-model"]["version"]
    if _installed_version() != pinned:
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=CHECKER,
            check=True,
            capture_output=True,
            timeout=600,
        )
    assert _installed_version() == pinned
    return node


def validate(node: str, path: Path) -> tuple[dict[str, Any], int]:
    done = subprocess.run(
        [node, str(CHECKER / "validate.mjs"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report, done.returncode


@pytest.fixture(scope="module")
def checked(node: str) -> tuple[dict[str, Any], int]:
    """The report on the repository's catalog-info.yaml, and the checker's exit code."""
    return validate(node, CATALOG_FILE)


def test_every_entity_passes_backstages_validators(checked: tuple[dict[str, Any], int]) -> None:
    report, code = checked
    assert report["errors"] == []
    assert code == 0
    kinds = {(e["kind"], e["name"]) for e in report["entities"]}
    assert kinds == {("Component", "kvplan"), ("API", "kvplan-api")}


def test_the_api_definition_is_the_exported_spec(checked: tuple[dict[str, Any], int]) -> None:
    report, _ = checked
    api = next(e for e in report["entities"] if e["kind"] == "API")
    assert api["spec"]["type"] == "openapi"
    # after `$text` is resolved: the very file `make openapi` writes (test_openapi.py keeps
    # that file equal to the app's spec)
    assert api["spec"]["definition"] == SPEC_FILE.read_text(encoding="utf-8")
    assert json.loads(api["spec"]["definition"])["info"]["title"] == "kvplan"


def test_the_component_provides_the_api_in_the_file(
    checked: tuple[dict[str, Any], int],
) -> None:
    report, _ = checked
    component = next(e for e in report["entities"] if e["kind"] == "Component")
    api = next(e for e in report["entities"] if e["kind"] == "API")
    ref = f"api:{api['namespace']}/{api['name']}"
    assert component["spec"]["providesApis"] == [ref]
    assert component["spec"]["owner"] == api["spec"]["owner"]


BROKEN = [
    # (what is wrong, a change to the Component or the API document, the error's words)
    ("a name Backstage refuses", ("Component", "metadata", "name", "kv plan!"), "name"),
    ("no owner", ("Component", "spec", "owner", None), "owner"),
    ("an unknown root field", ("Component", None, "extra", {"a": 1}), "additional properties"),
    (
        "a definition that is not text",
        ("API", "spec", "definition", {"openapi": "3.1.0"}),
        "definition",
    ),
    (
        "a $text naming no file",
        ("API", "spec", "definition", {"$text": "./no-such.json"}),
        "no-such",
    ),
]


@pytest.mark.parametrize(("why", "change", "words"), BROKEN, ids=[b[0] for b in BROKEN])
def test_the_validators_refuse_a_broken_entity(
    node: str, tmp_path: Path, why: str, change: tuple[str, str | None, str, Any], words: str
) -> None:
    # The same file with one thing broken must fail: the check above is not vacuous.
    kind, section, key, value = change
    documents = list(yaml.safe_load_all(CATALOG_FILE.read_text()))
    target = next(d for d in documents if d["kind"] == kind)
    holder = target if section is None else target[section]
    if value is None:
        del holder[key]
    else:
        holder[key] = value
    (tmp_path / "openapi").mkdir()
    shutil.copy(SPEC_FILE, tmp_path / "openapi" / "openapi.json")
    broken = tmp_path / "catalog-info.yaml"
    broken.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    report, code = validate(node, broken)
    assert code == 1, why
    assert len(report["errors"]) == 1, report
    assert words in report["errors"][0], report["errors"]
