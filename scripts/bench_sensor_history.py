"""Sensor-history queries on a full day of readings, against reading the latest value in the same run.

    python scripts/bench_sensor_history.py [--queries 1000] [--poll-interval 30]

Fills a temporary PLC cache through the real write path (`PlcStore.put_reading`, pruning included)
with 25 h of readings at the poll interval for every sensor of the demo plant, so the last hour of
writes prunes by age, then prints p50/p95 of: the latest value (baseline), the history of the last
hour and of 24 h (store query and the route's `sensor_history` with its trend), the trend alone, a
write before and after the history is full, and the history of the last hour and of 24 h over HTTP
(`GET /v1/devices/{id}/sensors/{sensor}/history` on the whole service on loopback, once its models
are warm), against `GET /healthz` on the same connection as the HTTP floor.
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

import httpx
from bench_support import free_port, pct, timed, wait_warm
from rich.console import Console
from rich.table import Table

from edge.config import Config, load_config
from edge.service.app import create_app
from edge.service.server import ServerThread
from edge.service.service import Service
from tools.plc.config import PlcConfig
from tools.plc.history import recent_trend, sensor_history
from tools.plc.simulator import nominal_value
from tools.plc.store import HistoryLimits, PlcStore

HOUR_MS = 3_600_000
TARGET = "target p95 ≤ 10 ms"
TOKEN = "bench-technician-token"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--poll-interval", type=float, help="seconds between readings (default: [plc] poll_interval_s)")
    args = parser.parse_args()
    config = load_config(env={})
    interval_s = args.poll_interval or config.plc.poll_interval_s
    # A shorter interval needs a larger row cap to keep the day (the config would insist on it too).
    needed_rows = int(config.plc.history_retention_s / interval_s) + 1
    plc = PlcConfig.model_validate(
        {
            **config.plc.model_dump(),
            "poll_interval_s": interval_s,
            "history_max_rows": max(config.plc.history_max_rows, needed_rows),
        }
    )
    sensors = [
        (device_id, sensor) for device_id, device in config.devices.items() for sensor in device.sensors.values()
    ]
    pick = random.Random(7)
    # Now, not a fixed instant: the route over HTTP reads up to the present.
    now_ms = int(time.time() * 1000)
    step_ms = int(interval_s * 1000)
    filling_ms = 25 * HOUR_MS

    with tempfile.TemporaryDirectory() as tmp:
        service_config = with_state(config, Path(tmp), plc)
        path = service_config.state_path(plc.cache_file)
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
        size_mb = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*")) / 1e6

        service = Service(service_config)
        with (
            ServerThread(create_app(service), "127.0.0.1", free_port(), limits=service_config.service) as server,
            httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
        ):
            wait_warm(service)

            def over_http(hours: int):
                device_id, sensor = random_sensor()
                client.get(
                    f"/v1/devices/{device_id}/sensors/{sensor.id}/history", params={"window_s": hours * 3600}
                ).raise_for_status()

            http_cases = [
                ("HTTP floor: GET /healthz", lambda: client.get("/healthz").raise_for_status(), "no token, no query"),
                ("history, last hour (HTTP)", lambda: over_http(1), TARGET),
                ("history, 24 h (HTTP)", lambda: over_http(24), f"{TARGET}; {per_sensor} points as JSON"),
            ]
            for name, fn, note in http_cases:
                timed(fn, 50)
                rows.append((name, timed(fn, args.queries), note))

    table = Table(
        title=f"Sensor history: {len(sensors)} sensors, one reading every {interval_s:g} s, "
        f"{per_sensor} rows per sensor kept, cache {size_mb:.1f} MB"
    )
    for column in ("case", "n", "p50 ms", "p95 ms", "× baseline p50", "note"):
        table.add_column(column, justify="right" if column not in ("case", "note") else "left")
    base_p50 = pct(rows[0][1], 0.5)
    for name, samples, note in rows:
        p50 = pct(samples, 0.5)
        table.add_row(name, str(len(samples)), f"{p50:.3f}", f"{pct(samples, 0.95):.3f}", f"{p50 / base_p50:.1f}", note)
    Console(width=120).print(table)
    return 0


def with_state(config: Config, state: Path, plc: PlcConfig) -> Config:
    """The service's config: its state (the PLC cache included) in `state`, the bench's token."""
    return config.model_copy(
        update={
            "state_dir": str(state),
            "plc": plc,
            "service": config.service.model_copy(update={"technician_tokens": [TOKEN]}),
        }
    )


if __name__ == "__main__":
    sys.exit(main())
