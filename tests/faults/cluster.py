"""What the fault suite owns: a throwaway PostgreSQL cluster and kvplan replicas, as processes.

The cluster is made with `initdb` in a temporary directory and run with `pg_ctl` on a spare
loopback port, never the machine's own server. Run as root (as `.ci/run` is), its commands run
as the `postgres` user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def spare_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version)
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path is None:
        raise RuntimeError(f"{name} not found under /usr/lib/postgresql/*/bin or on PATH")
    return on_path


def _version(path: str) -> tuple[int, ...]:
    version = Path(path).parents[1].name
    return tuple(int(p) for p in version.split(".") if p.isdigit())


class Cluster:
    def __init__(self) -> None:
        self.port = spare_port()
        self.root = Path(tempfile.mkdtemp(prefix="kvplan-faults-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/kvplan"

    def _run(self, *argv: str) -> None:
        command = list(argv)
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self._run(
            _pg_bin("initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.start()
        self._run(
            _pg_bin("psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            "CREATE DATABASE kvplan",
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c max_connections=200"
        )
        self._run(
            _pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def pids(self) -> list[int]:
        """The postmaster and every process it started."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    children.append(int(stat.parent.name))
        return [postmaster, *children]

    def freeze(self) -> list[int]:
        """SIGSTOP every process of the cluster: it hangs, connections stay open."""
        pids = self.pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    def thaw(self, pids: list[int]) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()
        if os.environ.get("KVPLAN_FAULTS_KEEP"):
            print(f"fault suite logs kept in {self.root}", file=sys.stderr)
        else:
            shutil.rmtree(self.root, ignore_errors=True)


class Replica:
    """`kvplan serve` on a loopback port, as a deployment runs it."""

    def __init__(self, name: str, database_url: str, token: str, logs: Path) -> None:
        self.name = name
        self.port = spare_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "KVPLAN_ADMIN_TOKENS": token,
            "KVPLAN_CATALOG_TTL_SECONDS": "1",
            "KVPLAN_LOG_LEVEL": "WARNING",
            # the writers here measure the database's faults, faster than one token may write
            "KVPLAN_WRITE_RATE_PER_SECOND": "0",
        }
        self.log_path = logs / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "service",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"replica {self.name} did not get ready: {self.log_path.read_text()}")

    def kill(self) -> None:
        """kill -9: no shutdown, no rollback, connections dropped mid-request."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def kvplan(database_url: str, *args: str) -> None:
    """A `kvplan` command (migrate, seed) against the cluster."""
    subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO,
        env={**os.environ, "DATABASE_URL": database_url},
        check=True,
        capture_output=True,
        timeout=120,
    )
