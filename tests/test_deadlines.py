"""`kvplan serve` cuts clients that send their request too slowly (service/kit/deadlines.py).

Each test talks to a real `kvplan serve` process through a raw socket, with both of uvicorn's
parsers, the deadlines set low (1 s for the head, 1.5 s for the body). A closed connection is
one whose read returns nothing; the wait for it (`PATIENCE`) is ten times the deadline, so
these tests assert what happens, never how fast.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

HEAD_SECONDS = 1.0
BODY_SECONDS = 1.5
PATIENCE = 10 * BODY_SECONDS
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: kvplan\r\n\r\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(server: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                assert json.load(r)["status"] == "ready"
                return
        except OSError:
            assert server.poll() is None, "kvplan serve exited"
            assert time.monotonic() < deadline, "kvplan serve did not answer in 30 s"
            time.sleep(0.2)


@pytest.fixture(scope="module", params=["httptools", "h11"])
def port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A `kvplan serve` on SQLite with short deadlines, on each parser."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path_factory.mktemp('served') / 'kvplan.db'}",
        "KVPLAN_HTTP": request.param,
        "KVPLAN_TIMEOUT_REQUEST_HEAD_SECONDS": str(HEAD_SECONDS),
        "KVPLAN_TIMEOUT_REQUEST_BODY_SECONDS": str(BODY_SECONDS),
    }
    kvplan = [sys.executable, "-m", "service"]
    subprocess.run([*kvplan, "migrate"], env=env, check=True, capture_output=True)
    number = _free_port()
    server = subprocess.Popen(
        [*kvplan, "serve", "--host", "127.0.0.1", "--port", str(number)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_ready(server, number)
        yield number
    finally:
        server.terminate()
        server.wait(timeout=10)


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(PATIENCE)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed the connection (a read returns nothing, or a reset)."""
    try:
        while sock.recv(65536):
            pass  # an answer before the close (there should be none)
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    with _connect(port) as sock:
        assert _closed_by_server(sock)


def test_a_head_that_stops_half_way_is_closed(port: int) -> None:
    with _connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: kvplan\r\n")
        assert _closed_by_server(sock)


def test_a_head_sent_a_byte_at_a_time_is_closed_though_bytes_keep_coming(port: int) -> None:
    # Slow loris: every byte would reset uvicorn's keep-alive timer; the head deadline runs from
    # the connection's opening. 200 bytes at 0.05 s each take 10 s, ten head deadlines.
    trickle = b"GET /healthz HTTP/1.1\r\nHost: kvplan\r\n" + b"X-Pad: " + b"a" * 160
    with _connect(port) as sock:
        try:
            for byte in trickle:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            return  # cut off while sending
        pytest.fail("the server read a 200-byte head for 10 s")


def test_a_body_that_stops_half_way_is_closed(port: int) -> None:
    head = (
        b"POST /v1/plans HTTP/1.1\r\nHost: kvplan\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n"
    )
    with _connect(port) as sock:
        sock.sendall(head + b'{"model": ')
        assert _closed_by_server(sock)


def test_a_keep_alive_client_that_asks_in_time_keeps_its_connection(port: int) -> None:
    # Five requests 0.4 s apart on one connection: 2 s in all, twice the head deadline, which
    # runs again from each answer.
    with _connect(port) as sock:
        for _ in range(5):
            sock.sendall(HEALTHZ)
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = sock.recv(65536)
                assert chunk, "the server closed a connection that asked in time"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200 ")
            time.sleep(0.4)


def _answer_then_close(sock: socket.socket) -> bytes:
    """What the server sent before it closed (a reset after an answer is a close too)."""
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except ConnectionResetError:
        pass
    return answer


def test_a_head_that_never_ends_is_refused_at_16_kib(port: int) -> None:
    # One header line that keeps growing, 1 KiB a write: the server stops reading it past
    # KVPLAN_H11_MAX_INCOMPLETE_EVENT_BYTES (16 KiB) whichever the parser; httptools alone
    # would buffer it for as long as the head deadline lets the client send.
    with _connect(port) as sock:
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: kvplan\r\nX-Pad: ")
            for _ in range(64):
                sock.sendall(b"a" * 1024)
        except (BrokenPipeError, ConnectionResetError):
            pass  # cut off while sending; the answer may still be readable
        answer = _answer_then_close(sock)  # a TimeoutError if the server kept reading
    assert answer.startswith((b"HTTP/1.1 431 ", b"HTTP/1.1 400 ")) or answer == b""


@pytest.mark.parametrize("port", ["httptools"], indirect=True)
def test_a_head_over_16_kib_in_one_write_is_refused_with_431(port: int) -> None:
    # 20 headers of 1 KiB: each complete, 20 KiB in all, sent at once
    headers = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1014) for i in range(20))
    with _connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: kvplan\r\n" + headers + b"\r\n")
        answer = _answer_then_close(sock)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"connection: close" in answer
