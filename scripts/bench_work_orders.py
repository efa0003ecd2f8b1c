"""Work-order store and webhook signing latency, against baselines measured in the same run.

    python scripts/bench_work_orders.py [--n 300]

Baselines: a bare SQLite INSERT + COMMIT on one long-lived connection with the
same durability (WAL, synchronous=FULL) for the store; the `standardwebhooks`
package for signing and verifying.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from standardwebhooks.webhooks import Webhook

from tools.work_orders.signing import signed_headers, verify
from tools.work_orders.store import WorkOrderStore

SECRET = "whsec_Zml4bG9vcC1kZW1vLW1lcy1zZWNyZXQtMDAwMQ=="


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def create(store: WorkOrderStore, fault: str, actor: str = "agent"):
    return store.create_or_get(
        device_id="press-3",
        fault_code=fault,
        title="Hydraulic press 3: overheating",
        summary="motor overheating, motor_temp 92 °C",
        priority="high",
        created_by=actor,
        run_id="bench",
        evidence=({"kind": "sensor", "sensor": "motor_temp", "value": 92.1},),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    n = parser.parse_args().n
    rows: list[tuple[str, list[float], list[float] | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = sqlite3.connect(Path(tmp) / "baseline.sqlite", isolation_level=None)
        base.execute("PRAGMA journal_mode=WAL")
        base.execute("PRAGMA synchronous=FULL")
        base.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT)")
        baseline = timed(
            lambda i: (
                base.execute("BEGIN IMMEDIATE"),
                base.execute("INSERT INTO t VALUES (?, ?)", (f"k{i}", "x" * 400)),
                base.execute("COMMIT"),
            ),
            n,
        )
        base.close()

        store = WorkOrderStore(Path(tmp) / "work_orders.sqlite")
        rows.append(("create new order (+ outbox row)", timed(lambda i: create(store, f"E{i}"), n), baseline))
        rows.append(("repeat: existing order returned", timed(lambda i: create(store, f"E{i}"), n), baseline))

        # Contention: 8 threads report the same fault at once, 40 times over.
        contended: list[float] = []
        lock = threading.Lock()

        def worker(barrier: threading.Barrier, fault: str) -> None:
            barrier.wait()
            start = time.perf_counter()
            create(store, fault)
            with lock:
                contended.append((time.perf_counter() - start) * 1000)

        for round_no in range(40):
            barrier = threading.Barrier(8)
            threads = [threading.Thread(target=worker, args=(barrier, f"C{round_no}")) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        rows.append(("8 threads, same fault at once", contended, baseline))

    body = b'{"type":"work_order.created","data":{"id":"WO-1","device_id":"press-3"}}' * 4
    reference = Webhook(SECRET)
    now = time.time()
    stamp = datetime.fromtimestamp(now, UTC)
    ref_sign = timed(lambda i: reference.sign(f"msg_{i}", stamp, body.decode()), n * 10)
    our_sign = timed(lambda i: signed_headers([SECRET], f"msg_{i}", body, now), n * 10)
    headers = signed_headers([SECRET], "msg_1", body, now)
    ref_verify = timed(lambda i: reference.verify(body, headers, json_parse=False), n * 10)
    our_verify = timed(lambda i: verify([SECRET], headers, body, time.time()), n * 10)
    rows.append(("sign (ours vs standardwebhooks)", our_sign, ref_sign))
    rows.append(("verify (ours vs standardwebhooks)", our_verify, ref_verify))

    print(f"{'measurement':38} {'p50 ms':>9} {'p95 ms':>9} {'base p50':>9} {'base p95':>9} {'p50 ratio':>9}")
    for name, samples, base_samples in rows:
        p50, p95 = percentiles(samples)
        b50, b95 = percentiles(base_samples)
        print(f"{name:38} {p50:9.3f} {p95:9.3f} {b50:9.3f} {b95:9.3f} {p50 / b50:8.2f}x")
    print(f"store baseline: bare INSERT+COMMIT, WAL, synchronous=FULL, one connection (n={n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
