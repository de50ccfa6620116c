"""A TCP proxy in front of PostgreSQL that can freeze: the database "hangs" without stopping.

While frozen it neither accepts new connections (they wait in the kernel's backlog, as they do
at a stopped postmaster) nor moves a byte either way on open ones (requests sit in socket
buffers, as they do at a stopped backend), which is what a SIGSTOPped server or a network
partition looks like from kvplan's side.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time


class FreezableProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._running = threading.Event()
        self._thawed = threading.Event()
        self._thawed.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> FreezableProxy:
        self._running.set()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._running.clear()
        self._thawed.set()
        self._thread.join(timeout=2)
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
        self._listener.close()

    def freeze(self) -> None:
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def _accept(self) -> None:
        while self._running.is_set():
            if not self._thawed.is_set():
                time.sleep(0.01)
                continue
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peer = {a: b, b: a}
        with selectors.DefaultSelector() as selector:
            selector.register(a, selectors.EVENT_READ)
            selector.register(b, selectors.EVENT_READ)
            while self._running.is_set():
                if not self._thawed.is_set():
                    time.sleep(0.01)
                    continue
                for key, _ in selector.select(timeout=0.05):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        for sock in (a, b):
                            with contextlib.suppress(OSError):
                                sock.close()
                        return
                    with contextlib.suppress(OSError):
                        peer[source].sendall(data)
