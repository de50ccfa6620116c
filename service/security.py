"""Admin bearer tokens for catalog writes: compared in constant time, never logged."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from .errors import Unauthorized

# Documents the scheme in OpenAPI; the check itself is `AdminRoute`, which runs first.
bearer_scheme = HTTPBearer(auto_error=False, description="An admin token (KVPLAN_ADMIN_TOKENS).")


def require_admin(request: Request) -> None:
    """Dependency for every write; runs before the body is read or validated."""
    tokens: tuple[str, ...] = request.app.state.settings.admin_token_list
    header = request.headers.get("authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise Unauthorized("catalog writes need an Authorization: Bearer <admin token> header")
    presented_bytes = presented.strip().encode()
    # Compare against every configured token without stopping early.
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(presented_bytes, token.encode())
    if not matched:
        raise Unauthorized("the bearer token is not an admin token")


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AdminRoute(APIRoute):
    """A route whose writes are refused (401) before the body is read or validated."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if request.method in WRITE_METHODS:
                require_admin(request)
            return await handler(request)

        return checked
