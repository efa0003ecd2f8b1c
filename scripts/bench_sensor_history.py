"""Sensor-history queries on a full day of readings, against reading the latest value in the same run.

    python scripts/bench_sensor_history.py [--queries 1000] [--poll-interval 30]

Fills a temporary PLC cache through the real write path (`PlcStore.put_reading`, pruning included)
with 25 h of readings at the poll interval for every sensor of the demo plant, so the last hour of
writes prunes by age, then prints p50/p95 of: the latest value (baseline), the history of the last
hour and of 24 h (store query and the route's `sensor_history` with its trend), the trend alone, and
a write before and after the history is full.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from edge.config import load_config  # noqa: E402
from tools.plc.config import PlcConfig  # noqa: E402
from tools.plc.history import recent_trend, sensor_history  # noqa: E402
from tools.plc.simulator import nominal_value  # noqa: E402
from tools.plc.store import HistoryLimits, PlcStore  # noqa: E402
from bench_support import pct, timed  # noqa: E402

HOUR_MS = 3_600_000
TARGET = "target p95 ≤ 10 ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, help="seconds between readings (default: [plc] poll_interval_s)")
    args = parser.parse_args()
    config = load_config(env={})
    interval_s = args.poll_interval or config.plc.poll_interval_s
    # A shorter interval needs a larger row cap to keep the day (the config would insist on it too).
    needed_rows = int(config.plc.history_retention_s / interval_s) + 1
    plc = PlcConfig.model_validate({**config.plc.model_dump(), "poll_interval_s": interval_s,
                                    "history_max_rows": max(config.plc.history_max_rows, needed_rows)})
    sensors = [(device_id, sensor) for device_id, device in config.devices.items() for sensor in device.sensors.values()]
    pick = random.Random(7)
    now_ms = 1_800_000_000_000
    step_ms = int(interval_s * 1000)
    filling_ms = 25 * HOUR_MS

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plc_cache.sqlite"
        store = PlcStore(path, history=HistoryLimits.of(plc))
        first_hour: list[float] = []
        last_hour: list[float] = []
        for ts_ms in range(now_ms - filling_ms + step_ms, now_ms + 1, step_ms):
            for device_id, sensor in sensors:
                value = nominal_value(sensor) * (1 + 0.05 * math.sin(ts_ms / HOUR_MS)) + pick.gauss(0, 0.1)
                started = time.perf_counter()
                store.put_reading(device_id, sensor.id, value, ts_ms)
                elapsed_ms = (time.perf_counter() - started) * 1000
                if ts_ms <= now_ms - 24 * HOUR_MS:
                    first_hour.append(elapsed_ms)
                elif ts_ms > now_ms - HOUR_MS:
                    last_hour.append(elapsed_ms)
        first_device, first_sensor = sensors[0]
        per_sensor = len(store.history(first_device, first_sensor.id, 0, now_ms))

        def random_sensor():
            return pick.choice(sensors)

        def latest():
            device_id, sensor = random_sensor()
            store.get_reading(device_id, sensor.id)

        def query(hours: int):
            device_id, sensor = random_sensor()
            store.history(device_id, sensor.id, now_ms - hours * HOUR_MS, now_ms)

        def route(hours: int):
            device_id, sensor = random_sensor()
            sensor_history(store, config.devices, device_id, sensor.id, window_s=hours * 3600, now_ms=now_ms)

        def trend_only():
            device_id, sensor = random_sensor()
            recent_trend(store, device_id, sensor, now_ms)

        cases = [
            ("latest value (baseline)", latest, ""),
            ("history, last hour (store query)", lambda: query(1), TARGET),
            ("history, 24 h (store query)", lambda: query(24), TARGET),
            ("sensor_history, last hour (route)", lambda: route(1), TARGET),
            ("sensor_history, 24 h (route)", lambda: route(24), TARGET),
            ("trend of the last hour", trend_only, TARGET),
        ]
        rows = []
        for name, fn, note in cases:
            timed(fn, 50)  # warm the page cache and the statement cache
            rows.append((name, timed(fn, args.queries), note))
        rows.append(("write, history still filling", first_hour, "put_reading, no pruning yet"))
        rows.append(("write, history full (prunes by age)", last_hour, "put_reading: one index seek per limit"))
        store.close()
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6

    table = Table(title=f"Sensor history: {len(sensors)} sensors, one reading every {interval_s:g} s, "
                        f"{per_sensor} rows per sensor kept, cache {size_mb:.1f} MB")
    for column in ("case", "n", "p50 ms", "p95 ms", "× baseline p50", "note"):
        table.add_column(column, justify="right" if column not in ("case", "note") else "left")
    base_p50 = pct(rows[0][1], 0.5)
    for name, samples, note in rows:
        p50 = pct(samples, 0.5)
        table.add_row(name, str(len(samples)), f"{p50:.3f}", f"{pct(samples, 0.95):.3f}", f"{p50 / base_p50:.1f}", note)
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
