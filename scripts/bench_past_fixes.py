"""Past-fix lookup latency (issue 14: p95 ≤ 10 ms with 10,000 closed orders), against baselines measured in the same run.

    python scripts/bench_past_fixes.py [--orders 10000] [--n 2000]

A temporary store is filled with closed orders (nine in ten done, the rest cancelled) over 200 machines
of 20 models and 60 fault codes, closed over two years. Faults are skewed as on a real line (Zipf over
codes and machines: a chronic fault on a bad machine has a few hundred orders), and a fault is looked
up as often as it occurs, so the lookups hit the long histories. The lookup is what the work-order tool does
on every call: the last fixes of the fault on this machine and on its same-model machines, and the
30-day recurrence count (`tools.work_orders.history.history_items`). Baselines: `store.get` of one
order by id (the floor: one connection, one primary-key read), and the same lookup on a copy of the
file indexed as the previous release left it (one (device_id, fault_key) index, no history indexes).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.bench_support import pct
from tools.plant import DeviceConfig
from tools.work_orders.history import history_items
from tools.work_orders.model import fault_key, order_id
from tools.work_orders.store import WorkOrderStore, _iso

MODELS = 20
PER_MODEL = 10
CODES = [f"E{100 + n}" for n in range(60)]
NOW = 1_772_000_000.0
TWO_YEARS = 730 * 86400.0
TARGET_P95_MS = 10.0
CODE_SKEW = 1.2
DEVICE_SKEW = 0.8


def plant() -> dict[str, DeviceConfig]:
    return {
        f"m{m:02d}-{n}": DeviceConfig(id=f"m{m:02d}-{n}", vendor="Hydra", model=f"HP-{m:02d}")
        for m in range(MODELS)
        for n in range(PER_MODEL)
    }


def faults(devices: list[str], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """`n` (device, code) occurrences, Zipf-distributed over both."""
    return list(
        zip(
            rng.choices(devices, [1 / r**DEVICE_SKEW for r in range(1, len(devices) + 1)], k=n),
            rng.choices(CODES, [1 / r**CODE_SKEW for r in range(1, len(CODES) + 1)], k=n),
        )
    )


def fill(path: Path, devices: list[str], orders: int, rng: random.Random) -> list[str]:
    """Closed orders written in one transaction straight into the store's own table (through the store API
    each would be four durable commits); returns their ids."""
    rows, ids = [], []
    episodes: dict[tuple[str, str], int] = {}
    for device, code in faults(devices, orders, rng):
        episodes[device, code] = episode = episodes.get((device, code), 0) + 1
        created = NOW - rng.uniform(0, TWO_YEARS)
        closed = created + rng.uniform(600, 3 * 86400)
        done = rng.random() < 0.9
        wo = order_id(device, code, f"episode:{episode}")
        ids.append(wo)
        rows.append(
            (
                wo,
                device,
                code,
                fault_key(code),
                f"{device} {code}",
                "motor overheating",
                "high",
                "done" if done else "cancelled",
                "technician",
                "bench",
                f"episode:{episode}",
                "[]",
                _iso(created),
                _iso(closed),
                _iso(closed),
                "technician",
                "coolant filter clogged" if done else None,
                "replaced the filter" if done else None,
                '[{"part":"FLT-200","quantity":1}]' if done else "[]",
                None,
            )
        )
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("BEGIN IMMEDIATE")
    con.executemany(
        """INSERT INTO work_orders (id, device_id, fault_code, fault_key, title, summary, priority, status,
               created_by, source_run_id, occurrence, evidence, created_at, updated_at, closed_at, closed_by,
               cause, remedy, parts, note)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        rows,
    )
    con.execute("COMMIT")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("ANALYZE")
    con.close()
    return ids


def timed(fn, calls: list) -> list[float]:
    out = []
    for args in calls:
        start = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=10_000)
    parser.add_argument("--n", type=int, default=2000, help="lookups per measurement")
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    devices = plant()
    with tempfile.TemporaryDirectory() as tmp:
        indexed = Path(tmp) / "work_orders.sqlite"
        store = WorkOrderStore(indexed, clock=lambda: NOW)
        ids = fill(indexed, list(devices), args.orders, rng)
        con = sqlite3.connect(indexed)
        (longest,) = con.execute(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM work_orders GROUP BY device_id, fault_key)"
        ).fetchone()
        con.close()
        plain_path = Path(tmp) / "previous_indexes.sqlite"
        shutil.copy(indexed, plain_path)
        con = sqlite3.connect(plain_path)
        con.executescript(
            "DROP INDEX work_orders_fixes; DROP INDEX work_orders_by_fault_time; "
            "CREATE INDEX work_orders_by_fault_key ON work_orders (device_id, fault_key); ANALYZE;"
        )
        con.close()
        plain = WorkOrderStore(plain_path, clock=lambda: NOW)  # an up-to-date file: its indexes are not rebuilt

        lookups = faults(list(devices), args.n, rng)
        gets = [(rng.choice(ids),) for _ in range(args.n)]
        found = [history_items(store, devices, device, code, proposed=False) for device, code in lookups[:200]]
        same = [history_items(plain, devices, device, code, proposed=False) for device, code in lookups[:200]]
        assert [[i.model_dump() for i in items] for items in found] == [
            [i.model_dump() for i in items] for items in same
        ]
        rows = [
            (
                "past-fix lookup (this machine + same model + 30-day count)",
                timed(lambda d, c: history_items(store, devices, d, c, proposed=False), lookups),
            ),
            ("baseline: store.get of one order", timed(store.get, gets)),
            (
                "baseline: past-fix lookup, previous release's index",
                timed(lambda d, c: history_items(plain, devices, d, c, proposed=False), lookups),
            ),
        ]
    items = sum(len(f) for f in found) / len(found)
    print(
        f"{args.orders} closed orders, {len(devices)} machines ({MODELS} models), {len(CODES)} codes, "
        f"{longest} orders on the longest history; {args.n} lookups each, {items:.1f} history items per lookup"
    )
    print(f"{'measurement':62} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, samples in rows:
        print(f"{name:62} {pct(samples, 0.5):8.3f} {pct(samples, 0.95):8.3f} {max(samples):8.3f}")
    p95 = pct(rows[0][1], 0.95)
    print(
        f"past-fix p95 {p95:.3f} ms vs target {TARGET_P95_MS:.0f} ms: {'met' if p95 <= TARGET_P95_MS else 'MISSED'}; "
        f"{p95 / pct(rows[1][1], 0.95):.1f}x a primary-key get, "
        f"{pct(rows[2][1], 0.95) / p95:.1f}x faster than with the previous release's index"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
