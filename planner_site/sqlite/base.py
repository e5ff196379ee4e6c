"""Django's SQLite backend, with the writers of one process queued in Python.

Bench (bench/runs.py --ab writer-lock, 2026-12-02, load 1–2): 20 runs at once 2.69 → 2.35 s, −13 %.

SQLite lets one connection write at a time. Django's backend leaves the others to SQLite's busy
handler, which sleeps between tries (1, 2, 5, 10 … 100 ms) while a newcomer may take the lock
ahead of them. With 20 runs at once, each holding the lock about a millisecond per event, writers
waited 34 ms at p90 and 0.4–0.7 s at p99 and worst for a transaction to begin: most of a run's
time in the queue. Here a writer first takes a lock of this process, which the last writer hands
on the moment it commits or rolls back. Writers in other processes on the same file (a db_worker
beside serve) still meet SQLite's own busy timeout, as before.

A connection takes the lock at ``BEGIN`` (Django's ``atomic``) and before a statement that writes
(INSERT, UPDATE, DELETE, REPLACE, a WITH that does one of those, CREATE, ALTER, DROP), and keeps
it while SQLite has a transaction open: until it ends (a commit, a rollback, closing the
connection, a raw COMMIT), or for that one statement in autocommit. A failed COMMIT (a deferred
foreign key) leaves SQLite's transaction open, and the lock with it, until the rollback. The lock
waits as long as SQLite would (``OPTIONS["timeout"]``), then fails the same way: "database is
locked"; a writer in another process on the same file is still met by SQLite's busy timeout.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from django.db.backends.sqlite3 import base
from django.db.utils import OperationalError

_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "ALTER", "DROP"})
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*(\w+)", re.DOTALL)
_WRITE_IN_WITH = re.compile(r"\b(?:INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def writer_lock(name: str) -> threading.Lock:
    """The lock this process's writers to the database file ``name`` take first."""
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


@functools.lru_cache(maxsize=512)
def _is_write(query: str) -> bool:
    """Whether ``query`` may write: by its first word after blanks and comments (remembered per
    statement text: a run sends the same few dozen statements, each many times)."""
    found = _FIRST_WORD.match(query)
    word = found.group(1).upper() if found else ""
    return word in _WRITES or (word == "WITH" and _WRITE_IN_WITH.search(query) is not None)


class DatabaseWrapper(base.DatabaseWrapper):
    _held: threading.Lock | None = None  # this connection's writer lock, while it holds it

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=CursorWrapper)
        cursor.owner = self
        return cursor

    def take_writer(self) -> None:
        """Take the writer lock, unless this connection holds it already."""
        if self._held is not None:
            return
        lock = writer_lock(str(self.settings_dict["NAME"]))
        if not lock.acquire(timeout=float(self.settings_dict["OPTIONS"].get("timeout", 5))):
            raise OperationalError("database is locked")
        self._held = lock

    def release_writer(self) -> None:
        lock, self._held = self._held, None
        if lock is not None:
            lock.release()

    def _start_transaction_under_autocommit(self) -> None:
        self.take_writer()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self.release_writer()
            raise

    def _set_autocommit(self, autocommit: bool) -> None:
        super()._set_autocommit(autocommit)
        # Turning autocommit back on commits what SQLite had open (sqlite3 does it implicitly).
        self.release_unless_in_transaction()

    def _commit(self) -> None:
        try:
            super()._commit()
        finally:
            self.release_unless_in_transaction()  # a failed COMMIT leaves it open

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self.release_unless_in_transaction()

    def release_unless_in_transaction(self) -> None:
        if self._held is not None and (self.connection is None or not self.connection.in_transaction):
            self.release_writer()

    def _close(self) -> None:
        try:
            super()._close()  # SQLite rolls back what was not committed
        finally:
            self.release_writer()


@functools.lru_cache(maxsize=512)
def _qmark(query: str) -> str:
    """Django's "format" to sqlite3's "qmark" parameters (``%s`` → ``?``), remembered per text:
    Django runs its regex over every statement it sends."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class CursorWrapper(base.SQLiteCursorWrapper):
    """Takes the writer lock before a write made outside ``atomic``; after any statement, hands
    it on once SQLite has no transaction open (a write in autocommit, or a raw COMMIT), and keeps
    it while one is (autocommit turned off: SQLite began one itself)."""

    owner: DatabaseWrapper

    # try/finally written out in each: every statement of the process comes through here.
    def execute(self, query: str, params: Any = None) -> Any:
        if _is_write(query):
            self.owner.take_writer()
        try:
            return super().execute(query, params)
        finally:
            self.owner.release_unless_in_transaction()

    def executemany(self, query: str, param_list: Any) -> Any:
        if _is_write(query):
            self.owner.take_writer()
        try:
            return super().executemany(query, param_list)
        finally:
            self.owner.release_unless_in_transaction()

    def executescript(self, sql_script: str) -> Any:
        # A script may write anything; sqlite3 commits what was open before it runs it.
        self.owner.take_writer()
        try:
            return super().executescript(sql_script)
        finally:
            self.owner.release_unless_in_transaction()

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)
