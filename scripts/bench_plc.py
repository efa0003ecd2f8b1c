"""PLC tool latency on loopback against the simulator, with a raw pymodbus baseline from the same run.

    python scripts/bench_plc.py [--reads 500] [--budget-ms 800]

Prints p50/p95 for: a raw pymodbus read (baseline), our live read through the
tool, the fallback on the first timeout (bounded by the budget), the read with
the breaker open, and one poller cycle per 100 sensors.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_support import pct
from pymodbus.client import ModbusTcpClient
from rich.console import Console
from rich.table import Table

from edge.config import load_config
from tools.contract import ToolContext
from tools.plant import DeviceConfig, PlcEndpoint, SensorConfig, repoint
from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway
from tools.plc.poller import poll_once
from tools.plc.simulator import start_simulator
from tools.plc.tool import PlcReadArgs, PlcReadTool

CTX = ToolContext(request_id="bench", run_id="bench", loop_step=1)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def hundred_sensor_device(port: int) -> dict[str, DeviceConfig]:
    sensors = {
        f"s{i:03d}": SensorConfig(
            address=i, data_type="int16", scale=0.1, unit="°C", plausible_min=-20, plausible_max=150, alarm_high=85
        )
        for i in range(100)
    }
    return {
        "line-1": DeviceConfig(id="line-1", plc=PlcEndpoint(host="127.0.0.1", port=port, unit_id=1), sensors=sensors)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--budget-ms", type=int, default=800)
    parser.add_argument("--fallbacks", type=int, default=5, help="first-timeout samples (each costs the budget)")
    args = parser.parse_args()
    logging.getLogger("fixloop.plc").setLevel(logging.ERROR)  # the breaker opens on purpose here

    demo = load_config(env={}).devices
    sim = start_simulator(demo, "127.0.0.1", 0)
    devices = repoint(demo, port=sim.port)
    sensor = devices["press-3"].sensors["coolant_level"]
    rows: list[tuple[str, list[float], str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        # Baseline: pymodbus alone, one connection, no budget, cache, breaker or formatting.
        raw = ModbusTcpClient("127.0.0.1", port=sim.port, timeout=1, retries=0)
        raw.connect()
        read_raw = lambda: raw.read_holding_registers(sensor.address, count=1, device_id=1)  # noqa: E731
        timed(read_raw, 50)
        baseline = timed(read_raw, args.reads)
        raw.close()
        rows.append(("raw pymodbus read (baseline)", baseline, ""))

        config = PlcConfig(read_budget_ms=args.budget_ms)
        tool = PlcReadTool(devices, config, Path(tmp) / "bench.sqlite")
        live_args = PlcReadArgs(device_id="press-3", sensor="coolant_level")
        timed(lambda: tool.run(live_args, CTX), 50)
        live = timed(lambda: tool.run(live_args, CTX), args.reads)
        rows.append(("live read via tool", live, "target p95 ≤ 20 ms"))

        # First timeout: a fresh breaker each sample, so every read waits for the budget then falls back.
        first_timeouts = []
        sim.silence("press-3")
        for i in range(args.fallbacks):
            fresh = PlcReadTool(devices, config, Path(tmp) / f"fallback-{i}.sqlite")
            fresh.gateway.store.put_reading("press-3", "coolant_level", 70.0, int(time.time() * 1000))
            first_timeouts += timed(partial(fresh.run, live_args, CTX), 1)
            fresh.close()
        rows.append(("fallback on first timeout", first_timeouts, f"bounded by the {args.budget_ms} ms budget"))

        for _ in range(config.breaker_threshold):
            tool.run(live_args, CTX)
        open_reads = timed(lambda: tool.run(live_args, CTX), args.reads)
        assert tool.run(live_args, CTX).items[0].fields["fallback_reason"].startswith("breaker open")
        rows.append(("read with breaker open", open_reads, "target ≤ 5 ms"))
        sim.silence("press-3", on=False)
        tool.close()
        sim.stop()

        big = start_simulator(hundred_sensor_device(1), "127.0.0.1", 0)
        gateway = PlcGateway(hundred_sensor_device(big.port), config, Path(tmp) / "poll.sqlite")
        poll_once(gateway)
        cycles = [poll_once(gateway).elapsed_s * 1000 for _ in range(20)]
        gateway.close()
        big.stop()
        rows.append(("poller cycle, 100 sensors", cycles, "per 30 s interval"))

    table = Table(title=f"PLC tool on loopback ({args.reads} reads, budget {args.budget_ms} ms)")
    for column in ("case", "n", "p50 ms", "p95 ms", "× baseline p50", "note"):
        table.add_column(column, justify="right" if column not in ("case", "note") else "left")
    base_p50 = statistics.median(baseline)
    for name, samples, note in rows:
        p50 = pct(samples, 0.5)
        table.add_row(name, str(len(samples)), f"{p50:.3f}", f"{pct(samples, 0.95):.3f}", f"{p50 / base_p50:.1f}", note)
    Console(width=110).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
