"""The layers ARCHITECTURE.md#layers draws, held by the imports themselves.

- The pure packages (`service/sizing/`, `service/simulation/`) import no web, database or I/O:
  the standard library less its I/O modules, themselves, and the few pure libraries named in
  PURE_LIBRARIES; the simulator may read sizing through its facade.
- Outside `service/sizing/`, code reads sizing through its facade (`service.sizing`), never a
  submodule: the facade is the only door. The core's own tests and the benchmark (`bench/`),
  which times the memoised steps one by one, are the two readers of its insides.
- A slice uses the kit, the sizing facade and itself; another slice only through the modules
  named in DOORS (its use cases, schemas and the catalog's snapshot). The kit uses no slice but
  the catalog's snapshot (`kit/deps.py`'s CatalogDep). The wiring (`app`, `cli` and its `cli_*`
  modules, `openapi_export`) uses anything.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PURE = ("sizing", "simulation")
KIT = "kit"
WIRING = {"__init__", "__main__", "app", "cli", "openapi_export"}
# Pure, well-kept libraries the pure packages may use: PyPA's PEP 440 (what pip orders by).
PURE_LIBRARIES = {"packaging"}
# Standard-library modules that reach the outside world: files, sockets, processes, databases,
# the clock's event loop, the environment.
IO_MODULES = {
    "asyncio", "concurrent", "ctypes", "dbm", "email", "fileinput", "ftplib", "glob", "http",
    "importlib", "io", "logging", "mmap", "multiprocessing", "os", "pathlib", "pickle", "select",
    "selectors", "shelve", "shutil", "signal", "smtplib", "socket", "socketserver", "sqlite3",
    "ssl", "subprocess", "sys", "tempfile", "threading", "urllib", "webbrowser", "zipfile",
}  # fmt: skip
IO_BUILTINS = {"open", "input", "print", "breakpoint"}
# Another slice's modules a slice may import, and why (ARCHITECTURE.md#layers).
DOORS = {
    "service.catalog.snapshot": "the in-memory catalog every request reads",
    "service.catalog.names": "the one resolver of the names people type (models, GPUs, totals)",
    "service.catalog.reads": "catalog reads from the database or, while it is down, the snapshot",
    "service.catalog.models": "the catalog's tables, which other tables' keys point at",
    "service.catalog.schemas": "catalog answer models reused in other answers",
    "service.catalog.repository": "the catalog version a calibration write bumps",
    "service.catalog.seed": "the shipped catalog, offline (calibration tables)",
    "service.planning.service": "planning's use cases: capacity and plan",
    "service.planning.schemas": "planning's question and answer models",
    "service.planning.cache": "the answer cache a profile's capacity shares with GET",
    "service.planning.exposition": "the capacity gauges in Prometheus's text format",
    "service.planning.calibrated": "the one hook giving a question its measured pool",
    "service.engine_logs": "the log parser's facade (pure): parse_engine_log and its types",
    "service.engine_logs.model": "a parsed engine log (pure)",
    "service.engine_logs.models": "the calibrations' table",
    "service.engine_logs.repository": "the calibrations the catalog snapshot carries",
    "service.deployments.repository": "profiles that point at a calibration, before deleting it",
    "service.speed_results.models": "the speed calibrations' table",
    "service.speed_results.repository": "the speed calibrations the catalog snapshot carries",
    "service.simulations.service": "simulations' use case, which the traffic pictures draw",
    "service.simulations.schemas": "simulations' question and answer models",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@cache
def exported(package: str) -> frozenset[str]:
    """The names a package's `__init__.py` lists in `__all__` (its facade)."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return frozenset()
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every module a file imports, relative imports made absolute; a
    `from package import name` names the submodule when `name` is one the package's facade
    does not export (`from service.sizing import frozen` is the facade's decorator)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                facade = alias.name in exported(target)
                yield node.lineno, sub if is_module(sub) and not facade else target


def layer(module: str) -> str:
    """wiring, kit, sizing, simulation, or slice:<name> (`service.x.y` -> x)."""
    parts = module.split(".")
    if parts[0] != "service":
        return parts[0]
    if len(parts) < 2 or parts[1] in WIRING or parts[1].startswith("cli_"):  # the CLI's own
        return "wiring"
    if parts[1] in (KIT, *PURE):
        return parts[1]
    return f"slice:{parts[1]}"


def service_files() -> list[Path]:
    files = sorted((ROOT / "service").rglob("*.py"))
    assert len(files) > 50  # the walk found the package
    return files


def test_the_pure_packages_import_no_web_database_or_io() -> None:
    bad = []
    for package in PURE:
        for path in sorted((ROOT / "service" / package).rglob("*.py")):
            where = path.relative_to(ROOT)
            for line, name in imports(path):
                top = name.split(".")[0]
                if name.startswith(f"service.{package}") or name == "__future__":
                    continue
                if package == "simulation" and name == "service.sizing":
                    continue
                if top in sys.stdlib_module_names and top not in IO_MODULES:
                    continue
                if top in PURE_LIBRARIES:
                    continue
                bad.append(f"{where}:{line} imports {name}")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bad += [
                f"{where}:{node.lineno} calls {node.func.id}()"
                for node in ast.walk(tree)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in IO_BUILTINS
            ]
    assert not bad, "pure means no web, database or I/O:\n" + "\n".join(bad)


def test_the_simulation_package_is_ready_and_checked() -> None:
    init = ROOT / "service" / "simulation" / "__init__.py"
    assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))


def test_sizing_is_read_through_its_facade() -> None:
    outside = [
        *(p for p in service_files() if layer(module_name(p)) != "sizing"),
        *sorted((ROOT / "migrations").rglob("*.py")),
    ]
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in outside
        for line, name in imports(path)
        if name.startswith("service.sizing.")
    ]
    assert not bad, "import these from service.sizing (its __init__ exports them):\n" + "\n".join(
        bad
    )


def test_slices_use_the_kit_sizing_and_each_other_only_through_doors() -> None:
    bad = []
    for path in service_files():
        here = layer(module_name(path))
        if here in ("wiring", *PURE):
            continue
        for line, name in imports(path):
            there = layer(name)
            if not name.startswith("service") or there in (here, "sizing", KIT):
                continue
            if name == "service.simulation":  # the simulator's facade, like sizing's
                continue
            if here == KIT:
                allowed = name == "service.catalog.snapshot"
            else:
                allowed = there.startswith("slice:") and name in DOORS
            if not allowed:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {name} ({there})")
    assert not bad, "a layer reached past its doors (ARCHITECTURE.md#layers):\n" + "\n".join(bad)


def test_every_door_is_a_module_some_slice_uses() -> None:
    used = {name for path in service_files() for _, name in imports(path)}
    assert set(DOORS) <= used, sorted(set(DOORS) - used)
    assert all(is_module(door) for door in DOORS)
