"""The servers under test: started as separate processes, watched from outside.

kvplan runs as `kvplan serve` (migrated and seeded first, as a deployment's Job does), the
baseline as `python -m bench.http.baseline`; both from this venv, on free ports of
127.0.0.1, with their output in a log file.
"""

from __future__ import annotations

import compileall
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psycopg
from sqlalchemy import make_url

import service
from service.kit.db import normalize_url

# `kvplan`, the console script installed beside this interpreter; `python -m service` is it too.
KVPLAN = Path(sys.executable).with_name("kvplan")


def kvplan_command(*args: str) -> list[str]:
    if KVPLAN.exists():
        return [str(KVPLAN), *args]
    return [sys.executable, "-m", "service", *args]


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(port: int, target: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """One GET over a new connection: (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head[9:12]), body


@dataclass
class Served:
    """A server process and what its start took."""

    name: str
    port: int
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float = field(default_factory=time.perf_counter)
    ready_s: float | None = None  # start to the first 200 of the readiness path
    first_answer_s: float | None = None  # start to the first 200 of the first question

    def wait_ready(self, path: str, first: str, timeout: float = 60.0) -> None:
        """Poll `path` until it answers 200, then ask `first` once; both times kept."""
        deadline = self.started + timeout
        while self.ready_s is None:
            if self.process.poll() is not None or time.perf_counter() > deadline:
                raise RuntimeError(f"{self.name} did not become ready; see {self.log.name}")
            try:
                if get(self.port, path)[0] == 200:
                    self.ready_s = time.perf_counter() - self.started
            except OSError:
                time.sleep(0.005)
        status, body = get(self.port, first)
        if status != 200:
            raise RuntimeError(f"{self.name} answered {first} with {status}: {body[:300]!r}")
        self.first_answer_s = time.perf_counter() - self.started

    def rss_bytes(self) -> int:
        """Resident memory of the server and its worker processes."""
        return sum(_rss(pid) for pid in (self.process.pid, *_children(self.process.pid)))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=25)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# bench/ stays out of the wheel, so it is not installed: a server started from another folder
# (`python -m bench.http.baseline`) finds it in the checkout this module is read from.
CHECKOUT = Path(__file__).resolve().parents[2]


def _with_checkout(environ: dict[str, str]) -> dict[str, str]:
    paths = [str(CHECKOUT), *filter(None, [environ.get("PYTHONPATH")])]
    return {**environ, "PYTHONPATH": os.pathsep.join(paths)}


def start(name: str, command: list[str], env: dict[str, str], workdir: Path) -> Served:
    port = free_port()
    log = (workdir / f"{name}.log").open("wb")
    started = time.perf_counter()
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", str(port)],
        env=_with_checkout({**os.environ, **env}),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
    )
    return Served(name, port, process, log, started)


def compile_package() -> None:
    """kvplan's modules compiled to bytecode, as a deployed replica has them.

    pip writes the bytecode of every module when the image installs the wheel, so a replica
    starts from it. An editable checkout run with PYTHONDONTWRITEBYTECODE=1 (the image's
    setting, and common in CI) would instead compile each module from its source at every
    start, a cost no deployed replica pays (about 0.15 s of the start-up on a busy 2-core
    machine). Done before any server starts, the baseline too (its modules are kvplan's).
    """
    compileall.compile_dir(Path(service.__file__).parent, quiet=1)


def prepare_kvplan(database_url: str, workdir: Path) -> dict[str, str]:
    """Migrate and seed the database, as a deployment does before serving; the environment."""
    env = {"KVPLAN_DATABASE_URL": database_url}
    for step in ("migrate", "seed"):
        subprocess.run(
            kvplan_command(step),
            env={**os.environ, **env},
            cwd=workdir,
            check=True,
            capture_output=True,
        )
    return env


# ---- a throwaway PostgreSQL database -----------------------------------------------------------


def _admin(url: str) -> psycopg.Connection[tuple[object, ...]]:
    parsed = make_url(normalize_url(url))
    return psycopg.connect(
        host=parsed.host,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        dbname=parsed.database,
        connect_timeout=3,
        autocommit=True,
    )


def create_database(server_url: str) -> str:
    """A new, empty database on the server of `server_url`; its URL."""
    name = f"kvplan_bench_{uuid.uuid4().hex[:10]}"
    with _admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parsed = make_url(normalize_url(server_url))
    return parsed.set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, database_url: str) -> None:
    name = make_url(database_url).database
    with _admin(server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
