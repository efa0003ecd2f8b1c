"""The poller keeps the cache fresh, and skips PLCs behind an open breaker."""

import sqlite3
import time

from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway
from tools.plc.poller import Poller, poll_once
from tools.plc.store import PlcStore


def test_poll_once_fills_the_cache_for_every_sensor(plant_devices, plc_sim, tmp_path):
    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite")
    try:
        report = poll_once(gateway)
        assert report.refreshed == 9 and report.total == 9
        for device_id, device in plant_devices.items():
            for sensor_id in device.sensors:
                assert gateway.store.get_reading(device_id, sensor_id) is not None
    finally:
        gateway.close()


def test_cache_written_by_the_poller_serves_the_tool_when_the_plc_goes_silent(plant_devices, plc_sim, tmp_path):
    cache = tmp_path / "c.sqlite"
    poller_gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), cache)
    poll_once(poller_gateway)
    poller_gateway.close()
    plc_sim.silence("press-3")
    tool_gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), cache)
    try:
        reading = tool_gateway.read("press-3", "oil_temp")
        assert reading.source == "cache_fallback" and reading.value is not None
    finally:
        tool_gateway.close()


def test_poller_reports_failures_and_probes_an_open_unit_once_per_cycle(plant_devices, plc_sim, tmp_path):
    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=150), tmp_path / "c.sqlite")
    try:
        plc_sim.silence("press-3")
        plc_sim.exception("cnc-7", "vibration", 2)
        first = poll_once(gateway)
        # Three press-3 timeouts open the unit breaker; its fourth and fifth sensors are skipped.
        assert (first.refreshed, first.no_communication, first.skipped) == (3, 3, 2)
        assert (
            list(first.rejected) == ["cnc-7/vibration"] and "ILLEGAL DATA ADDRESS" in first.rejected["cnc-7/vibration"]
        )
        # Each cycle probes the open unit once; its failure ends the unit's cycle.
        second = poll_once(gateway)
        assert (second.no_communication, second.skipped) == (1, 4)
    finally:
        gateway.close()


def test_poller_thread_runs_cycles_until_stopped(plant_devices, plc_sim, tmp_path):
    cycles = []
    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite")
    poller = Poller(gateway, interval_s=0.05, on_cycle=cycles.append)
    poller.start()
    deadline = time.monotonic() + 5
    while len(cycles) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    poller.stop()
    gateway.close()
    assert len(cycles) >= 2 and all(c.refreshed == 9 for c in cycles)
    store = PlcStore(tmp_path / "c.sqlite")
    try:
        assert store.get_reading("cnc-7", "spindle_speed") is not None
    finally:
        store.close()


def hold_write_lock(path):
    """Another process's writer in the middle of a transaction on the shared cache file."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def wait_for(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_poller_thread_survives_a_locked_cache_and_resumes(plant_devices, plc_sim, tmp_path, caplog):
    cache = tmp_path / "c.sqlite"
    cycles = []
    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), cache, busy_timeout_s=0.05)
    holder = hold_write_lock(cache)
    poller = Poller(gateway, interval_s=0.05, on_cycle=cycles.append)
    poller.start()
    try:
        wait_for(lambda: sum("cycle failed" in r.message for r in caplog.records) >= 2)
        holder.rollback()
        wait_for(lambda: len(cycles) >= 1)
        assert poller._thread is not None and poller._thread.is_alive()
    finally:
        poller.stop()
        holder.close()
        gateway.close()
    failures = [r for r in caplog.records if "cycle failed" in r.message]
    assert len(failures) >= 2 and "database is locked" in failures[0].exc_text
    assert cycles and cycles[0].refreshed == 9


def test_poller_thread_survives_a_failing_on_cycle_hook(plant_devices, plc_sim, tmp_path):
    cycles = []

    def flaky(report):
        cycles.append(report)
        if len(cycles) == 1:
            raise RuntimeError("dashboard went away")

    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite")
    poller = Poller(gateway, interval_s=0.05, on_cycle=flaky)
    poller.start()
    try:
        wait_for(lambda: len(cycles) >= 2)
    finally:
        poller.stop()
        gateway.close()
    assert len(cycles) >= 2
