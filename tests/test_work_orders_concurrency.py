"""Exactly one order under contention: many threads, many processes, and a writer killed with SIGKILL."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.work_orders.store import WorkOrderStore

WORKERS = 16


def _create(store: WorkOrderStore, actor: str, alarm: dict | None = None, evidence: tuple = (), fault: str = "E102"):
    return store.create_or_get(
        device_id="press-3",
        fault_code=fault,
        title="Hydraulic press 3 E102: overheating",
        summary="motor overheating",
        priority="high",
        created_by=actor,
        run_id=f"run-{actor}",
        alarm=alarm,
        evidence=evidence,
    )


def _process_worker(path: str, index: int, barrier, results) -> None:
    store = WorkOrderStore(Path(path))
    # Two technicians and the MES at once: different actors, and the MES brings its own occurrence id.
    actor = ("technician", "agent", "mes")[index % 3]
    alarm = {"event_id": "evt-77", "occurred_at": "2025-03-01T08:00:00Z"} if actor == "mes" else None
    barrier.wait(timeout=60)
    order, created = _create(store, actor, alarm)
    results.put((order.id, created))


def _big_writer(path: str, fault: str, ready, done) -> None:
    store = WorkOrderStore(Path(path))
    # A large evidence trace makes the write transaction long enough to be killed inside it.
    evidence = ({"kind": "sensor_trace", "samples": "x" * 8_000_000},)
    ready.set()
    _create(store, "agent", evidence=evidence, fault=fault)
    done.set()


def _assert_consistent(path: Path) -> None:
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        # No half-written rows: every order has exactly its creation event in the outbox, and nothing else is orphaned.
        assert con.execute("""SELECT count(*) FROM work_orders o
                              WHERE (SELECT count(*) FROM outbox x WHERE x.work_order_id = o.id
                                     AND x.event_type = 'work_order.created') != 1""").fetchone() == (0,)
        assert (
            con.execute("""SELECT count(*) FROM outbox x
                              WHERE NOT EXISTS (SELECT 1 FROM work_orders o WHERE o.id = x.work_order_id)""").fetchone()
            == (0,)
        )
        assert (
            con.execute("""SELECT device_id, fault_code FROM work_orders
                              WHERE status IN ('open', 'acknowledged', 'in_progress')
                              GROUP BY device_id, fault_code HAVING count(*) > 1""").fetchall()
            == []
        )
    finally:
        con.close()


def test_many_threads_at_once_make_one_order(work_order_store):
    barrier = threading.Barrier(WORKERS)
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        actor = ("technician", "agent", "mes")[index % 3]
        alarm = {"event_id": "evt-9", "occurred_at": "2025-03-01T08:00:00Z"} if actor == "mes" else None
        barrier.wait()
        order, created = _create(work_order_store, actor, alarm)
        with lock:
            results.append((order.id, created))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == WORKERS
    assert len({order_id for order_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert len(work_order_store.list()) == 1
    _assert_consistent(work_order_store.path)


def test_many_processes_at_once_make_one_order(tmp_path):
    path = tmp_path / "work_orders.sqlite"
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(8), ctx.Queue()
    # The store file is created by the racing processes themselves: schema set-up must be race-safe too.
    processes = [ctx.Process(target=_process_worker, args=(str(path), i, barrier, results)) for i in range(8)]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=90) for _ in processes]
        for process in processes:
            process.join(timeout=30)
            assert process.exitcode == 0
    finally:
        # A worker that died before the barrier must fail the test, not leave the others (and pytest) waiting.
        for process in processes:
            if process.is_alive():
                process.kill()
    assert len({order_id for order_id, _ in outcomes}) == 1
    assert sum(created for _, created in outcomes) == 1
    assert len(WorkOrderStore(path).list()) == 1
    _assert_consistent(path)


def _wait_for_writer_lock(path: Path, done, deadline: float) -> bool:
    """Spin until another connection holds the write lock (True) or the writer finished (False)."""
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        while time.monotonic() < deadline and not done.is_set():
            try:
                probe.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                return True
            probe.execute("ROLLBACK")
        return False
    finally:
        probe.close()


def test_sigkill_inside_the_write_leaves_nothing_half_written(tmp_path):
    path = tmp_path / "work_orders.sqlite"
    store = WorkOrderStore(path)
    ctx = multiprocessing.get_context("fork")
    aborted = 0
    # Kill at several points of the transaction: right after it takes the lock, then later in the large write.
    for round_no, delay_s in enumerate((0.0, 0.002, 0.01, 0.03, 0.06, 0.1)):
        fault = f"E{100 + round_no}"
        ready, done = ctx.Event(), ctx.Event()
        child = ctx.Process(target=_big_writer, args=(str(path), fault, ready, done))
        child.start()
        assert ready.wait(30)
        if _wait_for_writer_lock(path, done, time.monotonic() + 30):
            time.sleep(delay_s)
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        assert child.exitcode in (-signal.SIGKILL, 0)
        _assert_consistent(path)
        committed = store.active_for("press-3", fault) is not None
        aborted += not committed
        # Whatever the killed writer left, callers racing afterwards agree on exactly one order.
        with ThreadPoolExecutor(max_workers=4) as pool:
            racing = [pool.submit(_create, store, "technician", fault=fault) for _ in range(4)]
        results = [call.result() for call in racing]
        assert len({order.id for order, _ in results}) == 1
        assert sum(created for _, created in results) == (0 if committed else 1)
        assert len(store.list(device_id="press-3")) == round_no + 1
    _assert_consistent(path)
    # The test is only worth something if some kills landed inside the transaction, before its commit.
    assert aborted >= 1
