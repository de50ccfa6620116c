"""service/sizing is pure arithmetic: it imports the standard library and itself, nothing else."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SIZING = Path(__file__).resolve().parents[2] / "service" / "sizing"


def _foreign_imports(path: Path) -> list[str]:
    depth = len(path.relative_to(SIZING).parts) - 1  # packages between the file and sizing/
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # `from .x` stays in the file's package; each further dot climbs one package
            names = [node.module or ""] if node.level == 0 else []
            if node.level - 1 > depth:
                names = ["." * node.level + (node.module or "")]
        else:
            continue
        for name in names:
            if name.split(".")[0] not in sys.stdlib_module_names and not (
                name == "service.sizing" or name.startswith("service.sizing.")
            ):
                found.append(f"{path.relative_to(SIZING.parents[1])}:{node.lineno} imports {name}")
    return found


def test_the_sizing_package_imports_only_the_standard_library_and_itself() -> None:
    files = sorted(SIZING.rglob("*.py"))
    assert len(files) > 10  # the walk found the package
    foreign = [bad for path in files for bad in _foreign_imports(path)]
    assert not foreign, "service/sizing must stay pure:\n" + "\n".join(foreign)
