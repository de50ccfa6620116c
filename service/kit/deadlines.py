"""Deadlines uvicorn does not have: a request's head, and its body, must arrive in time.

uvicorn closes a keep-alive connection idle after a response (`timeout_keep_alive`), but a
connection that has sent nothing yet, or sends its head a byte at a time (slow loris), is held
as long as the client likes: the keep-alive timer is armed only when a response completes and
is cancelled by every byte that arrives (uvicorn/protocols/http/httptools_impl.py and
h11_impl.py, `on_response_complete`, `data_received`). These protocols are uvicorn's own with
two timers added, armed and cancelled as uvicorn's keep-alive timer is:

- **the head**: a request's line and headers must be complete within `timeout_request_head`
  seconds of the connection opening or of the previous response completing; otherwise the
  connection is closed, without an answer (as nginx's `client_header_timeout` does);
- **the body**: once the head is in, the whole body must arrive within `timeout_request_body`
  seconds; otherwise the connection is closed and the endpoint reading it sees the client gone.

A head is also limited in size: httptools reads one of any size (a 2 MB header was answered
200), so a head longer than `max_request_head_bytes` (the same setting as h11's own limit,
`h11_max_incomplete_event_size`) is answered 431 and the connection closed.

Both protocols (httptools and h11) create a request's `cycle` when its head is complete and set
`cycle.more_body` false when its body is, so the timers watch those two after each read.
`kvplan serve` passes `ServerConfig` (uvicorn's Config with the two timeouts) and one of these
classes as uvicorn's `http` (service/kit/server.py). A timeout of 0 turns its timer off.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("kvplan.server")


class ServerConfig(uvicorn.Config):
    """uvicorn's Config plus the deadlines and the head size; it travels to worker processes
    whole."""

    def __init__(
        self,
        app: Any,
        *,
        timeout_request_head: float = 10.0,
        timeout_request_body: float = 30.0,
        max_request_head_bytes: int = 16384,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.timeout_request_head = timeout_request_head
        self.timeout_request_body = timeout_request_body
        self.max_request_head_bytes = max_request_head_bytes


_TOO_LARGE_TEXT = b"Request head too large."
_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8"
    b"\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
    % (len(_TOO_LARGE_TEXT), _TOO_LARGE_TEXT)
)


class _Deadlines(asyncio.Protocol):
    """The two timers, mixed in before uvicorn's protocol class (which it calls through
    `super()`); the attributes below are uvicorn's."""

    config: uvicorn.Config
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any  # uvicorn's RequestResponseCycle: `more_body`, `response_complete`

    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _body_cycle: Any = None  # the request the body timer is for
    _head_bytes = 0  # bytes received while the head awaited now is incomplete
    _parsed_head_bytes = 0  # the parsed parts of the head being read (httptools)
    _head_too_large = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        awaiting = self._awaiting_head()
        super().data_received(data)
        if awaiting and self._awaiting_head():
            self._head_bytes += len(data)
            if self._head_bytes > getattr(self.config, "max_request_head_bytes", self._head_bytes):
                self._refuse_head()
                return
        else:
            self._head_bytes = 0
        self._progress()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head()
        self._cancel_body()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        # The answer is sent: a body still arriving no longer matters to the endpoint, and
        # what follows on the connection is the next request's head, under the head timer.
        self._cancel_body()
        self._progress()  # h11 may have started a request it had buffered
        if self.transport.is_closing():
            self._cancel_head()
        elif self._awaiting_head():
            self._await_head()

    def handle_websocket_upgrade(self, *args: Any) -> None:
        self._cancel_head()
        self._cancel_body()
        super().handle_websocket_upgrade(*args)  # type: ignore[misc]

    # ---- the timers ----

    def _awaiting_head(self) -> bool:
        return self.cycle is None or bool(self.cycle.response_complete)

    def _await_head(self) -> None:
        self._cancel_head()
        seconds = getattr(self.config, "timeout_request_head", 0)
        if seconds > 0:
            self._head_timer = self.loop.call_later(seconds, self._head_late)

    def _progress(self) -> None:
        """After a read: a head that arrived stops the head timer and starts the body timer
        where a body follows; a body that arrived stops the body timer."""
        cycle = self.cycle
        if self._head_timer is not None and not self._awaiting_head():
            self._cancel_head()
        if cycle is not None and cycle is not self._body_cycle and not cycle.response_complete:
            self._body_cycle = cycle
            self._cancel_body()
            seconds = getattr(self.config, "timeout_request_body", 0)
            if cycle.more_body and seconds > 0:
                self._body_timer = self.loop.call_later(seconds, self._body_late)
        if self._body_timer is not None and not (cycle is not None and cycle.more_body):
            self._cancel_body()

    def _head_late(self) -> None:
        self._head_timer = None
        if self._awaiting_head() and not self.transport.is_closing():
            log.debug("closed a connection whose request head did not arrive in time")
            self.transport.close()

    def _body_late(self) -> None:
        self._body_timer = None
        cycle = self._body_cycle
        if cycle is not None and cycle.more_body and not self.transport.is_closing():
            log.info("closed a connection whose request body did not arrive in time")
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if self._head_too_large:  # the parser stopped because a callback below refused
            self._refuse_head()
            return
        super().send_400_response(msg)  # type: ignore[misc]

    def _count_head(self, size: int) -> None:
        """Count a parsed part of the head; past the limit, stop the parser (uvicorn answers a
        parser error with send_400_response, which answers 431 instead)."""
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > getattr(self.config, "max_request_head_bytes", size):
            self._head_too_large = True
            raise HeadTooLarge

    def _refuse_head(self) -> None:
        self._cancel_head()
        if not self.transport.is_closing():
            self.transport.write(_HEAD_TOO_LARGE)
            self.transport.close()

    def _cancel_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _cancel_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None


class HeadTooLarge(Exception):
    """Raised in a parser callback to stop reading a head past the limit."""


class H11Deadlines(_Deadlines, H11Protocol):
    """uvicorn's h11 protocol with the deadlines (`KVPLAN_HTTP=h11`)."""


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools comes with uvicorn[standard]
    AutoDeadlines: type[asyncio.Protocol] = H11Deadlines
else:

    class HttpToolsDeadlines(_Deadlines, HttpToolsProtocol):
        """uvicorn's httptools protocol with the deadlines (the default), and a limit on the
        head's size, which httptools lacks: the URL and headers are counted as they are
        parsed (a head that arrives whole in one read), the bytes received while a head is
        incomplete in `data_received` (a head that never ends)."""

        def on_message_begin(self) -> None:
            self._parsed_head_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
            super().on_header(name, value)

    AutoDeadlines = HttpToolsDeadlines


# `KVPLAN_HTTP` -> the protocol class, as uvicorn's `http` import string (workers import it)
PROTOCOLS = {
    "auto": f"{__name__}:AutoDeadlines",
    "httptools": f"{__name__}:HttpToolsDeadlines",
    "h11": f"{__name__}:H11Deadlines",
}
