"""No function in service/ is longer than 80 lines (issue 6: the longest must stay under 80).

ruff's PLR0915 (max 50 statements) catches long logic; this census also catches long functions
of data and layout, which statements undercount. Lines run from `def` to the body's last line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80


def test_no_function_in_service_is_over_80_lines() -> None:
    too_long = []
    for path in sorted((ROOT / "service").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LIMIT:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {lines}")
    assert too_long == []
