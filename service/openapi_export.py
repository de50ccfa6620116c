"""Write the app's OpenAPI spec (`make openapi`); tests fail when the committed one differs.

python -m service.openapi_export openapi/openapi.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .app import create_app
from .kit.settings import Settings


def openapi_spec() -> dict[str, Any]:
    # No database is touched while the spec is built.
    app = create_app(Settings(database_url="sqlite://"))
    return app.openapi()


def render(spec: dict[str, Any]) -> str:
    return json.dumps(spec, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else "openapi/openapi.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(openapi_spec()), encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
