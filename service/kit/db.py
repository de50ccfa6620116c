"""Database engine and sessions. SQL lives in the repositories; this module only connects.

A PostgreSQL database that hangs (a frozen server, a network partition) must not hang kvplan,
so every connection is bounded three ways:

- `statement_timeout` (server side, `db_statement_timeout_seconds`): a statement the server is
  slow to finish is cancelled by the server, and the connection stays usable;
- an answer deadline (client side, `db_answer_timeout_seconds`): a server that says nothing at
  all (frozen processes, a dropped network) cannot cancel anything, so kvplan stops waiting
  for any one answer after the deadline, closes that connection and raises OperationalError;
- TCP keepalives (`db_keepalives_idle_seconds`): an idle pooled connection to a host that is
  gone is noticed by the kernel instead of being handed out.

`DatabaseHealth` remembers whether the database answered: after an answer deadline or a
connect timeout, callers that can do without the database (catalog reads, the snapshot) skip
it, writes fail at once with 503, and at most one attempt per `RETRY_INTERVAL_SECONDS` goes
through to find out whether it is back (`Database.probe_in_background` for writes, the
snapshot's refresh, `/readyz`). The first answer opens the gate again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from .settings import Settings

if TYPE_CHECKING:
    from psycopg.abc import PQGen

log = logging.getLogger("kvplan.db")

# While the database is not answering, one caller per interval may try it.
RETRY_INTERVAL_SECONDS = 1.0
# psycopg's own poll interval (psycopg.connection._WAIT_INTERVAL): how often a wait wakes up.
_WAIT_INTERVAL = 0.1


def normalize_url(url: str) -> str:
    """`postgresql://` and `postgres://` mean psycopg 3 here (not psycopg2)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


class DatabaseHealth:
    """Whether the database answered its last round trip; a gate for callers while it did not.

    Only timeouts close the gate (a server that refuses connections fails fast on its own).
    """

    def __init__(self, retry_interval_seconds: float = RETRY_INTERVAL_SECONDS) -> None:
        self._interval = retry_interval_seconds
        self._lock = threading.Lock()
        self._silent_since: float | None = None
        self._last_timeout = -float("inf")
        self._last_try = -float("inf")

    @property
    def answering(self) -> bool:
        """No answer deadline or connect timeout since the database last answered."""
        return self._silent_since is None

    @property
    def silent_seconds(self) -> float:
        """How long since the first unanswered round trip (0 while answering)."""
        since = self._silent_since
        return 0.0 if since is None else time.monotonic() - since

    def timed_out(self) -> None:
        """A round trip got no answer in time."""
        with self._lock:
            now = time.monotonic()
            if self._silent_since is None:
                self._silent_since = now
            self._last_timeout = self._last_try = now

    def answered(self) -> None:
        if self._silent_since is not None:
            with self._lock:
                self._silent_since = None

    def may_try(self) -> bool:
        """Always while answering; while silent, True for one caller per retry interval."""
        if self._silent_since is None:
            return True
        with self._lock:
            now = time.monotonic()
            if now - self._last_try < self._interval:
                return False
            self._last_try = now
            return True

    def just_timed_out(self) -> bool:
        """A timeout within the last retry interval: a new connection would not help now."""
        return self._silent_since is not None and (
            time.monotonic() - self._last_timeout < self._interval
        )


def _connection_class(answer_timeout: float | None, health: DatabaseHealth) -> type[Any]:
    """psycopg's Connection with a deadline on every wait for the server (query, commit, ...)."""
    # psycopg is imported with the first PostgreSQL engine: a replica on SQLite never needs it.
    import psycopg  # noqa: PLC0415
    from psycopg.errors import _WaitTimeout as WaitTimeout  # noqa: PLC0415

    class DeadlineConnection(psycopg.Connection[Any]):
        def wait(
            self,
            gen: PQGen[Any],
            interval: float = _WAIT_INTERVAL,
            timeout: float | None = None,
        ) -> Any:
            try:
                result = super().wait(
                    gen, interval=interval, timeout=answer_timeout if timeout is None else timeout
                )
            except WaitTimeout as exc:
                health.timed_out()
                # The protocol is mid-exchange: this connection can never be used again.
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"the database did not answer within {answer_timeout} s"
                ) from exc
            health.answered()
            return result

    return DeadlineConnection


def _postgres_connect_args(settings: Settings, url: str) -> dict[str, Any]:
    args: dict[str, Any] = {
        "connect_timeout": settings.db_connect_timeout_seconds,
        "keepalives": 1,
        "keepalives_idle": settings.db_keepalives_idle_seconds,
        "keepalives_interval": max(1, settings.db_keepalives_idle_seconds // 3),
        "keepalives_count": 3,
    }
    if settings.db_statement_timeout_seconds > 0:
        # Added to any `options` the URL already has (a later -c wins in PostgreSQL).
        options = make_url(url).query.get("options", "")
        if not isinstance(options, str):
            options = " ".join(options)
        timeout_ms = round(settings.db_statement_timeout_seconds * 1000)
        args["options"] = f"{options} -c statement_timeout={timeout_ms}".strip()
    return args


def create_db_engine(settings: Settings, health: DatabaseHealth | None = None) -> Engine:
    url = normalize_url(settings.database_url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 15})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        return engine
    import psycopg  # noqa: PLC0415 (see _connection_class)
    from psycopg.errors import ConnectionTimeout  # noqa: PLC0415

    health = health or DatabaseHealth()
    answer_timeout = settings.db_answer_timeout_seconds or None
    connection_class = _connection_class(answer_timeout, health)
    engine = create_engine(
        url,
        pool_pre_ping=True,
        pool_size=settings.db_pool_size,
        pool_timeout=settings.db_pool_timeout_seconds,
        connect_args=_postgres_connect_args(settings, url),
    )

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        if health.just_timed_out():
            # e.g. the pre-ping of a pooled connection just timed out: connecting again would
            # wait out connect_timeout for a server that is not answering.
            raise psycopg.OperationalError("the database is not answering; not reconnecting yet")
        try:
            connection = connection_class.connect(*cargs, **cparams)
        except ConnectionTimeout:
            health.timed_out()
            raise
        health.answered()
        return connection

    return engine


class Database:
    """The engine and the one way to open a session; tests swap `sessions` for a savepoint one."""

    def __init__(self, engine: Engine, health: DatabaseHealth | None = None) -> None:
        self.engine = engine
        self.health = health or DatabaseHealth()
        self.sessions: sessionmaker[Session] = sessionmaker(engine, expire_on_commit=False)

    def probe_in_background(self) -> None:
        """While the database is silent: one `SELECT 1` per retry interval, in a thread of its
        own, so that the first answer reopens the gate without a request having to wait."""
        if self.health.answering or not self.health.may_try():
            return
        threading.Thread(target=self._probe, name="kvplan-db-probe", daemon=True).start()

    def _probe(self) -> None:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except Exception as exc:  # the deadline already marked the database silent
            log.info("database still not answering: %s", exc)

    @classmethod
    def from_settings(cls, settings: Settings) -> Database:
        health = DatabaseHealth()
        return cls(create_db_engine(settings, health), health)

    @contextmanager
    def session(self) -> Iterator[Session]:
        session = self.sessions()
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()
