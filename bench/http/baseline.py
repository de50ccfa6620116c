"""The benchmark's baseline: FastAPI's fastest route, served as `kvplan serve` serves kvplan.

python -m bench.http.baseline --port PORT

One `async def` route (no thread-pool hop) returning a constant dict, at the path and with
the query string kvplan's repeated question uses, with no middleware: what any FastAPI app
pays for an answer. It is served by `server.serve` with the same settings (workers, loop,
HTTP parser, keep-alive, limits) as kvplan, from the same venv.
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI

from service.kit import server
from service.kit.settings import Settings

ANSWER: dict[str, object] = {"max_concurrency": 42, "kv_cache_tokens": 1234567, "fits": True}


def create_app() -> FastAPI:
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get("/v1/capacity")
    async def capacity() -> dict[str, object]:
        return ANSWER

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    server.serve(
        Settings(),
        host=args.host,
        port=args.port,
        workers=args.workers,
        app=f"{__name__}:create_app",
    )


if __name__ == "__main__":
    main()
