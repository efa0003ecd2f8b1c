"""How soon PLC answers are live again after the PLC returns, and what 16 parallel asks do to the breaker.

    python scripts/bench_plc_recovery.py [--trials 5] [--poll-interval 30] [--down-s 20]

Runs `fixloop plc sim` as its own process and injects faults through its control
port (what `fixloop plc fault` does). The service's arrangement in one process:
the agent's PLC tool and a poller thread on the same cache file, default `[plc]`
policy. Each trial silences press-3 until its unit breaker is open and has stayed
down `--down-s` (the tool keeps asking, so its own probes back the window off),
then ends the fault and times the first live answer. The baseline is the poll
interval measured in the same run (the target: live within one interval, 30 s by
default); before the fix only the breaker's open window (`breaker_open_s`, 30 min)
ended the cache answers. Then 16 parallel asks with press-3 answering in 0.3 s.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from bench_support import free_port, pct
from rich.console import Console
from rich.table import Table

from edge.config import load_config
from tools.contract import ToolContext
from tools.plant import repoint
from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway
from tools.plc.poller import Poller, PollReport
from tools.plc.tool import PlcReadArgs, PlcReadTool

CTX = ToolContext(request_id="bench", run_id="bench", loop_step=1)
DEVICE, SENSOR = "press-3", "motor_temp"
ASK_EVERY_S = 0.1
PARALLEL = 16
SLOW_S = 0.3


class Simulator:
    """`fixloop plc sim` in a child process, driven over its fault-injection port."""

    def __init__(self) -> None:
        self.port, control_port = free_port(), free_port()
        self.control = f"http://127.0.0.1:{control_port}"
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge.cli.main",
                "plc",
                "sim",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--control-port",
                str(control_port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[1],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise SystemExit(f"fixloop plc sim exited: {self._process.stderr.read().decode()[-2000:]}")
            try:
                httpx.get(f"{self.control}/state", timeout=1).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.stop()
        raise SystemExit("fixloop plc sim did not come up within 60 s")

    def fault(self, **body: object) -> None:
        response = httpx.post(f"{self.control}/fault", json=body, timeout=5)
        if response.status_code != 200:
            raise SystemExit(f"fault {body} refused: {response.text}")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()


def ask(tool: PlcReadTool, sensor: str = SENSOR) -> dict:
    return tool.run(PlcReadArgs(device_id=DEVICE, sensor=sensor), CTX).items[0].fields


def wait_until(condition, timeout_s: float, every_s: float = ASK_EVERY_S) -> float:
    """Seconds until `condition()` held; exits the script if it never does."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise SystemExit(f"gave up after {timeout_s:g} s waiting for {condition.__doc__ or condition}")
        time.sleep(every_s)
    return time.monotonic() - started


def recovery_trial(sim: Simulator, tool: PlcReadTool, down_s: float, timeout_s: float) -> tuple[float, int]:
    """Seconds from the PLC's return to the first live answer, and the unit's failures when it returned."""
    sim.fault(fault="silence", device=DEVICE)

    def breaker_open() -> bool:
        """the unit breaker to open"""
        return (ask(tool)["fallback_reason"] or "").startswith("breaker open")

    wait_until(breaker_open, timeout_s)
    down_until = time.monotonic() + down_s
    while time.monotonic() < down_until:
        ask(tool)  # technicians keep asking: the tool's own probes back the window off
        time.sleep(0.5)
    failures = max((row.failures for row in tool.gateway.store.all_breakers() if row.device_id == DEVICE), default=0)
    sim.fault(fault="silence", device=DEVICE, on=False)

    def live() -> bool:
        """a live answer"""
        return ask(tool)["source"] == "live"

    return wait_until(live, timeout_s), failures


def parallel_asks(sim: Simulator, tool: PlcReadTool, opened: list[dict]) -> dict:
    sensors = list(tool.devices[DEVICE].sensors)
    sim.fault(fault="slow", device=DEVICE, seconds=SLOW_S)
    before = len(opened)
    try:

        def timed(i: int) -> tuple[dict, float]:
            started = time.perf_counter()
            fields = ask(tool, sensors[i % len(sensors)])
            return fields, (time.perf_counter() - started) * 1000

        with ThreadPoolExecutor(PARALLEL) as pool:
            answers = list(pool.map(timed, range(PARALLEL)))
    finally:
        sim.fault(fault="clear", device=DEVICE)
    unit = [row for row in tool.gateway.store.all_breakers() if row.device_id == DEVICE and row.sensor == "*"]
    reasons = Counter((f["fallback_reason"] or "").split(":")[0] for f, _ in answers if f["source"] != "live")
    return {
        "live": sum(f["source"] == "live" for f, _ in answers),
        "fallback": dict(reasons),
        "unit_breaker": unit[0].state if unit else "closed",
        "unit_failures": unit[0].failures if unit else 0,
        "openings": len(opened) - before,
        "ms": [ms for _, ms in answers],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--poll-interval", type=float, help="poller interval in s (default: [plc] poll_interval_s)")
    parser.add_argument(
        "--down-s", type=float, default=20.0, help="how long the PLC stays silent once its breaker is open"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    console = Console()

    config = load_config(env={})
    plc: PlcConfig = config.plc
    interval = args.poll_interval or plc.poll_interval_s
    sim = Simulator()
    devices = repoint(config.devices, port=sim.port)
    cycles: list[float] = []
    opened: list[dict] = []
    with tempfile.TemporaryDirectory() as state:
        cache = Path(state) / plc.cache_file
        tool = PlcReadTool(devices, plc, cache, on_breaker_open=opened.append)
        poller_gateway = PlcGateway(devices, plc, cache)

        def on_cycle(report: PollReport) -> None:
            cycles.append(time.monotonic() - report.elapsed_s)

        poller = Poller(poller_gateway, interval, on_cycle=on_cycle)
        poller.start()
        try:
            console.print(
                f"\\[plc] read budget {plc.read_budget_ms} ms, breaker after {plc.breaker_threshold} failures, "
                f"open {plc.breaker_first_open_s:g} s doubling to {plc.breaker_open_s:g} s; poll every {interval:g} s; "
                f"simulator in its own process on 127.0.0.1:{sim.port}"
            )
            wait_until(lambda: ask(tool)["source"] == "live", 30)
            recoveries, failures = [], []
            jitter = random.Random(12)
            for n in range(1, args.trials + 1):
                # The PLC returns at a different point of the poll cycle each trial, as it would in the field.
                down_s = args.down_s + jitter.uniform(0, interval)
                seconds, count = recovery_trial(sim, tool, down_s, timeout_s=interval * 3 + 60)
                recoveries.append(seconds)
                failures.append(count)
                console.print(
                    f"trial {n}: live {seconds:.1f} s after the PLC returned "
                    f"(unit breaker open window then {plc.breaker_window_s(count):g} s)"
                )
            parallel = parallel_asks(sim, tool, opened)
        finally:
            poller.stop()
            poller_gateway.close()
            tool.close()
            sim.stop()

    spacing = [b - a for a, b in pairwise(cycles)]
    measured = statistics.median(spacing) if spacing else float("nan")
    table = Table(
        title=f"Live again after the PLC's return ({args.trials} trials, down {args.down_s:g} s + jitter with the breaker open)"
    )
    for column in ("", "p50 s", "p95 s", "max s"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row(
        "fixloop: first live answer",
        f"{pct(recoveries, 0.5):.1f}",
        f"{pct(recoveries, 0.95):.1f}",
        f"{max(recoveries):.1f}",
    )
    table.add_row(
        "baseline: poll interval (measured)",
        f"{measured:.1f}",
        f"{pct(spacing, 0.95):.1f}" if spacing else "-",
        f"{max(spacing):.1f}" if spacing else "-",
    )
    table.add_row(
        "before: breaker open window",
        f"{plc.breaker_open_s:g}",
        f"{plc.breaker_open_s:g}",
        "(configured, not waited for)",
    )
    console.print(table)
    console.print(
        f"p95 recovery / measured poll interval = {pct(recoveries, 0.95) / measured:.2f} "
        f"(target: live within 30 s: {'met' if max(recoveries) <= 30 else 'missed'})"
    )

    ms = parallel["ms"]
    console.print(
        f"{PARALLEL} parallel asks of {DEVICE}, PLC answering in {SLOW_S:g} s: live {parallel['live']}, "
        f"from cache {sum(parallel['fallback'].values())} {parallel['fallback']}; unit breaker {parallel['unit_breaker']} "
        f"({parallel['unit_failures']} failures counted), openings {parallel['openings']}; "
        f"ask p50 {pct(ms, 0.5):.0f} ms, p95 {pct(ms, 0.95):.0f} ms, max {max(ms):.0f} ms "
        f"(before: each lock wait counted as a timeout, the unit breaker opened for {plc.breaker_open_s:g} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
