"""`kvplan serve`: uvicorn with the production settings (service/kit/settings.py), in one place.

The image and the Helm chart run `kvplan serve`, so these are their settings too.

- httptools and uvloop (`uvicorn[standard]`; `auto` picks them);
- uvicorn's own access log off: `middleware.AccessLog` writes every answer of 400 and above and
  a sample of the rest (`KVPLAN_ACCESS_LOG_SAMPLE`), so a busy replica does not format a line
  per autoscaler poll;
- idle keep-alive connections closed after 5 s; a request's head must arrive within 10 s of
  the connection opening or of the previous answer, and its body within 30 s of its head
  (`deadlines.py`: uvicorn's protocols with the two timers uvicorn lacks); at most 1024
  connections or requests in flight per process (more get 503), 20 s for requests in flight on
  SIGTERM, request heads of at most 16 KiB (either parser);
- several workers share one listening socket with TCP_NODELAY set on it: uvicorn's workers on
  the asyncio loop otherwise answer every keep-alive request about 40 ms late (the socket a
  worker inherits no longer says it is TCP, so asyncio does not set TCP_NODELAY on the
  connections it accepts, and each answer waits for the client's delayed ACK; accepted
  connections inherit the option from the listening socket on Linux, `man 7 tcp`).
"""

from __future__ import annotations

import socket
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from .deadlines import PROTOCOLS, ServerConfig
from .settings import Settings

APP = "service.app:create_app"


def options(settings: Settings, *, workers: int | None = None) -> dict[str, Any]:
    """ServerConfig's keyword arguments for these settings (the app and address aside)."""
    return {
        "workers": workers or settings.workers,
        "loop": settings.loop,
        "http": PROTOCOLS[settings.http],
        "log_level": settings.log_level.lower(),
        "access_log": False,  # middleware.AccessLog writes it
        "proxy_headers": True,
        "server_header": False,
        "timeout_keep_alive": settings.timeout_keep_alive_seconds,
        "timeout_request_head": settings.timeout_request_head_seconds,
        "timeout_request_body": settings.timeout_request_body_seconds,
        "limit_concurrency": settings.limit_concurrency or None,
        "timeout_graceful_shutdown": settings.timeout_graceful_shutdown_seconds,
        "h11_max_incomplete_event_size": settings.h11_max_incomplete_event_bytes,
        "max_request_head_bytes": settings.h11_max_incomplete_event_bytes,
    }


def serve(
    settings: Settings,
    *,
    host: str,
    port: int,
    workers: int | None = None,
    app: str = APP,
    factory: bool = True,
) -> None:
    """Serve `app` in the foreground until SIGTERM or SIGINT."""
    config = ServerConfig(
        app, factory=factory, host=host, port=port, **options(settings, workers=workers)
    )
    if config.workers > 1:
        Multiprocess(config, sockets=[listening_socket(config)]).run()
        return
    uvicorn.Server(config).run()


def listening_socket(config: uvicorn.Config) -> socket.socket:
    """The socket the workers share, with TCP_NODELAY set for every connection it accepts."""
    listening = config.bind_socket()
    if listening.family in (socket.AF_INET, socket.AF_INET6):
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return listening
