"""planner_site.sqlite: the writers of one process queue on a Python lock, not in SQLite's sleeps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.utils import timezone
from django_tasks_db.utils import is_locked_database_exception

from planner_site.models import WorkerBeat
from planner_site.sqlite.base import writer_lock

pytestmark = pytest.mark.django_db(transaction=True)


def lock() -> threading.Lock:
    return writer_lock(str(connection.settings_dict["NAME"]))


@contextmanager
def other_thread() -> Iterator[Callable[[Callable[[], Any]], Future[Any]]]:
    """Run work in a thread of its own (with its own connection), closed afterwards."""
    with ThreadPoolExecutor(max_workers=1) as pool:

        def submit(work: Callable[[], Any]) -> Future[Any]:
            return pool.submit(work)

        try:
            yield submit
        finally:
            pool.submit(connections.close_all).result(timeout=10)


def beat(name: str) -> None:
    WorkerBeat.objects.create(worker_id=name, seen_at=timezone.now())


def test_the_backend_is_in_use() -> None:
    assert connection.settings_dict["ENGINE"] == "planner_site.sqlite"


def test_a_transaction_waits_for_the_writer_lock_and_goes_on_when_it_is_free() -> None:
    def write() -> None:
        with transaction.atomic():
            beat("in a transaction")

    with other_thread() as submit:
        with lock():
            pending = submit(write)
            with pytest.raises(TimeoutError):
                pending.result(timeout=0.3)  # SQLite itself is not locked: only the lock holds it
        pending.result(timeout=10)
    assert WorkerBeat.objects.filter(worker_id="in a transaction").exists()
    assert not lock().locked()


def test_an_autocommit_write_outside_a_transaction_takes_the_lock_too() -> None:
    with other_thread() as submit:
        with lock():
            pending = submit(lambda: beat("autocommit"))
            with pytest.raises(TimeoutError):
                pending.result(timeout=0.3)
        pending.result(timeout=10)
    assert WorkerBeat.objects.filter(worker_id="autocommit").exists()
    assert not lock().locked()


def test_reads_never_wait_for_the_lock() -> None:
    beat("readable")
    with other_thread() as submit, lock():
        assert submit(lambda: WorkerBeat.objects.filter(worker_id="readable").count()).result(timeout=10) == 1


def test_the_lock_is_held_for_the_whole_transaction_and_released_on_commit_or_rollback() -> None:
    with transaction.atomic():
        assert lock().locked()
        beat("committed")
        with transaction.atomic():  # a savepoint: no second take
            beat("nested")
    assert not lock().locked()
    with pytest.raises(RuntimeError), transaction.atomic():
        beat("rolled back")
        raise RuntimeError("stop")
    assert not lock().locked()
    assert set(WorkerBeat.objects.values_list("worker_id", flat=True)) == {"committed", "nested"}


def test_a_transaction_sqlite_began_itself_keeps_the_lock_until_it_ends() -> None:
    """Autocommit off without ``atomic``: SQLite begins a transaction before the first write. The
    lock stays taken until it ends, or another writer could take the lock and then wait on
    SQLite for this transaction, which would wait on the lock for its next write."""

    def write_in_a_transaction() -> None:
        with transaction.atomic():
            beat("other")

    transaction.set_autocommit(False)
    try:
        beat("first")
        assert lock().locked()
        with other_thread() as submit:
            other = submit(write_in_a_transaction)
            with pytest.raises(TimeoutError):
                other.result(timeout=0.3)  # waits for this transaction, on the lock
            beat("second")  # not stuck behind the other writer
            transaction.commit()
            other.result(timeout=10)
        beat("third")
        assert lock().locked()
    finally:
        transaction.set_autocommit(True)  # commits "third" (sqlite3 does) and hands the lock on
    assert not lock().locked()
    assert set(WorkerBeat.objects.values_list("worker_id", flat=True)) == {"first", "second", "other", "third"}


def test_a_commit_that_fails_keeps_the_lock_until_the_rollback() -> None:
    """SQLite keeps a transaction open when its COMMIT fails on a deferred foreign key."""
    from django.db import IntegrityError

    from planner_site.models import AuditEvent

    transaction.set_autocommit(False)
    try:
        AuditEvent.objects.create(actor_id=987654, action="x", target_type="t", target_id="1", data={})
        with pytest.raises(IntegrityError):
            transaction.commit()
        assert connection.connection.in_transaction
        assert lock().locked()  # another writer would wait on SQLite, then on this one
        transaction.rollback()
        assert not lock().locked()
    finally:
        transaction.set_autocommit(True)
    assert not AuditEvent.objects.filter(actor_id=987654).exists()


def test_a_transaction_ended_by_a_raw_commit_hands_the_lock_on() -> None:
    transaction.set_autocommit(False)
    try:
        beat("raw")
        assert lock().locked()
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")
        assert not lock().locked()
    finally:
        transaction.set_autocommit(True)
    assert WorkerBeat.objects.filter(worker_id="raw").exists()


def test_a_script_takes_the_lock_and_hands_it_on() -> None:
    with other_thread() as submit:
        with lock():
            pending = submit(lambda: connections["default"].cursor().executescript(
                "INSERT INTO planner_site_workerbeat (worker_id, seen_at) VALUES ('script', '2026-01-01');"
            ))
            with pytest.raises(TimeoutError):
                pending.result(timeout=0.3)
        pending.result(timeout=10)
    assert WorkerBeat.objects.filter(worker_id="script").exists()
    assert not lock().locked()


@pytest.mark.parametrize(
    ("query", "writes"),
    [
        ("  /* a note */ -- another\n insert into t values (1)", True),
        ("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", True),
        ("REPLACE INTO t VALUES (1)", True),
        ("CREATE TABLE t (x)", True),
        ("WITH x AS (SELECT 1) SELECT * FROM x", False),
        ("SELECT 'insert' FROM t", False),
        ("-- a note\nSELECT 1", False),
    ],
)
def test_writes_are_told_apart_from_reads_past_comments_and_with(query: str, writes: bool) -> None:
    from planner_site.sqlite.base import _is_write

    assert _is_write(query) is writes


def test_a_writer_that_waits_longer_than_the_timeout_is_told_the_database_is_locked() -> None:
    def write_with_short_timeout() -> None:
        connections["default"].settings_dict["OPTIONS"] = {
            **connections["default"].settings_dict["OPTIONS"], "timeout": 0.1
        }
        with transaction.atomic():
            beat("never")

    options = connection.settings_dict["OPTIONS"]
    try:
        with other_thread() as submit, lock(), pytest.raises(OperationalError) as raised:
            submit(write_with_short_timeout).result(timeout=10)
    finally:
        connection.settings_dict["OPTIONS"] = options  # the settings dict is shared by threads
    # django-tasks-db's worker retries a claim on exactly this error.
    assert is_locked_database_exception(raised.value)
    assert not WorkerBeat.objects.filter(worker_id="never").exists()


def test_many_threads_writing_at_once_all_succeed_and_leave_the_lock_free() -> None:
    def writes(n: int) -> None:
        try:
            for i in range(10):
                with transaction.atomic():
                    beat(f"t{n}-{i}")
                WorkerBeat.objects.filter(worker_id=f"t{n}-{i}").update(seen_at=timezone.now())
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        for future in [pool.submit(writes, n) for n in range(8)]:
            future.result(timeout=60)
    assert WorkerBeat.objects.count() == 80
    assert not lock().locked()


def test_parameters_are_converted_once_per_statement_text_as_django_converts_them() -> None:
    """The ``%s`` → ``?`` conversion is remembered per text; a literal ``%%`` is still one ``%``."""
    from django.db.backends.sqlite3.base import SQLiteCursorWrapper

    from planner_site.sqlite.base import _qmark

    for sql in ("SELECT %s, '100%%', %s", "SELECT 1", "UPDATE t SET a = %s WHERE b LIKE '%%x%%'"):
        assert _qmark(sql) == SQLiteCursorWrapper.convert_query(None, sql)  # type: ignore[arg-type]
    _qmark.cache_clear()
    for _ in range(3):
        _qmark("SELECT %s")
    assert _qmark.cache_info().misses == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s, '5%%'", [7])
        assert cursor.fetchone() == (7, "5%")
        cursor.execute("SELECT :a", {"a": 8})  # named parameters go to Django's own conversion
        assert cursor.fetchone() == (8,)
