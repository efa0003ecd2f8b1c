"""Circuit breaker: opens after consecutive timeouts, skips the network, notifies once, survives restarts."""

import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import REGISTRY

from tools.contract import ToolContext
from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway
from tools.plc.poller import poll_once
from tools.plc.tool import PlcReadArgs, PlcReadTool

CTX = ToolContext(request_id="req-1", run_id="run-1", loop_step=1)


def read(tool, device, sensor) -> dict:
    return tool.run(PlcReadArgs(device_id=device, sensor=sensor), CTX).items[0].fields


def opened_total(device, sensor) -> float:
    return REGISTRY.get_sample_value("fixloop_plc_breaker_open_total", {"device": device, "sensor": sensor}) or 0.0


def test_three_timeouts_open_the_breaker_and_the_next_read_skips_the_network(plant_devices, plc_sim, tmp_path, caplog):
    events = []
    tool = PlcReadTool(
        plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite", on_breaker_open=events.append
    )
    before = opened_total("press-3", "*")
    try:
        read(tool, "press-3", "coolant_level")
        plc_sim.silence("press-3")
        with caplog.at_level(logging.WARNING, logger="fixloop.plc"):
            for _ in range(3):
                assert read(tool, "press-3", "coolant_level")["fallback_reason"].startswith("timeout")
        requests = plc_sim.requests("press-3")
        f = read(tool, "press-3", "coolant_level")
        assert plc_sim.requests("press-3") == requests  # no request reached the PLC
        assert f["source"] == "cache_fallback" and f["quality"] == "UncertainNoCommunicationLastUsableValue"
        assert "breaker open" in f["fallback_reason"]
        # The unit's breaker covers its other sensors too.
        assert "breaker open for the PLC unit" in read(tool, "press-3", "motor_temp")["fallback_reason"]
        assert plc_sim.requests("press-3") == requests
        # Other units behind the same endpoint are not affected.
        assert read(tool, "cnc-7", "spindle_temp")["source"] == "live"
    finally:
        tool.close()
    assert len(events) == 1
    assert events[0]["event"] == "plc_breaker_open" and events[0]["device_id"] == "press-3"
    assert events[0]["consecutive_failures"] == 3 and events[0]["probe_after_ms"] > events[0]["opened_at_ms"]
    assert opened_total("press-3", "*") == before + 1
    logged = [r for r in caplog.records if r.name == "fixloop.plc" and getattr(r, "plc_event", None)]
    assert len(logged) == 1 and logged[0].plc_event["sensor"] == "*"


def test_breaker_state_survives_a_restart(plant_devices, plc_sim, tmp_path):
    cache = tmp_path / "c.sqlite"
    tool = PlcReadTool(plant_devices, PlcConfig(read_budget_ms=200), cache)
    plc_sim.silence("cnc-7")
    for _ in range(3):
        read(tool, "cnc-7", "vibration")
    tool.close()
    plc_sim.silence("cnc-7", on=False)
    events = []
    restarted = PlcReadTool(plant_devices, PlcConfig(read_budget_ms=200), cache, on_breaker_open=events.append)
    try:
        requests = plc_sim.requests("cnc-7")
        f = read(restarted, "cnc-7", "vibration")
        assert "breaker open" in f["fallback_reason"] and f["quality"] == "BadNoCommunication"
        assert plc_sim.requests("cnc-7") == requests and events == []
    finally:
        restarted.close()


def test_half_open_probe_closes_the_breaker_when_the_plc_is_back(plant_devices, plc_sim, tmp_path):
    events = []
    tool = PlcReadTool(
        plant_devices,
        PlcConfig(read_budget_ms=200, breaker_open_s=0.3),
        tmp_path / "c.sqlite",
        on_breaker_open=events.append,
    )
    try:
        plc_sim.silence("press-3")
        for _ in range(3):
            read(tool, "press-3", "motor_temp")
        time.sleep(0.35)
        # The probe fails: re-opened for another window, operations is not told twice.
        assert read(tool, "press-3", "motor_temp")["fallback_reason"].startswith("timeout")
        assert "breaker open" in read(tool, "press-3", "motor_temp")["fallback_reason"]
        plc_sim.silence("press-3", on=False)
        time.sleep(0.35)
        assert read(tool, "press-3", "motor_temp")["source"] == "live"
        assert read(tool, "press-3", "oil_temp")["source"] == "live"
    finally:
        tool.close()
    assert len(events) == 1


def test_modbus_exceptions_do_not_count_towards_the_breaker(plant_devices, plc_sim, tmp_path):
    tool = PlcReadTool(plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite")
    try:
        plc_sim.exception("press-3", "coolant_level", 6)
        for _ in range(4):
            assert (
                tool.run(PlcReadArgs(device_id="press-3", sensor="coolant_level"), CTX).error_code == "modbus_exception"
            )
        requests = plc_sim.requests("press-3")
        tool.run(PlcReadArgs(device_id="press-3", sensor="coolant_level"), CTX)
        assert plc_sim.requests("press-3") == requests + 1
    finally:
        tool.close()


def test_quality_mix_is_counted(plc_tool, plc_sim):
    labels = {"device": "cnc-7", "sensor": "spindle_speed", "quality": "Good"}
    before = REGISTRY.get_sample_value("fixloop_plc_reads_total", labels) or 0.0
    read(plc_tool, "cnc-7", "spindle_speed")
    assert REGISTRY.get_sample_value("fixloop_plc_reads_total", labels) == before + 1


def test_parallel_asks_queue_for_the_connection_without_opening_the_breaker(plant_devices, plc_sim, tmp_path):
    """16 asks at once of a healthy PLC that takes 0.3 s: the queue for the shared connection is ours, not a PLC fault."""
    events = []
    tool = PlcReadTool(
        plant_devices, PlcConfig(read_budget_ms=800), tmp_path / "c.sqlite", on_breaker_open=events.append
    )
    sensors = list(plant_devices["press-3"].sensors)
    try:
        read(tool, "press-3", sensors[0])  # a cached value for the asks the queue cannot serve in time
        plc_sim.slow("press-3", 0.3)
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda i: read(tool, "press-3", sensors[i % len(sensors)]), range(16)))
        sources = Counter(a["source"] for a in answers)
        assert sources["live"] >= 2
        assert all(a["fallback_reason"].startswith("busy") for a in answers if a["source"] != "live")
        assert tool.gateway.store.all_breakers() == [] and events == []
        assert read(tool, "press-3", sensors[1])["source"] == "live"
    finally:
        tool.close()


def test_open_window_starts_short_and_doubles_up_to_the_maximum(plant_devices, plc_sim, tmp_path):
    config = PlcConfig(read_budget_ms=150, breaker_first_open_s=0.3, breaker_open_s=1.0)
    assert [config.breaker_window_s(n) for n in (3, 4, 5, 6, 500)] == [0.3, 0.6, 1.0, 1.0, 1.0]
    events = []
    tool = PlcReadTool(plant_devices, config, tmp_path / "c.sqlite", on_breaker_open=events.append)
    try:
        plc_sim.silence("cnc-7")
        for _ in range(3):
            read(tool, "cnc-7", "vibration")
        assert events[0]["probe_after_ms"] - events[0]["opened_at_ms"] == 300
        time.sleep(0.35)
        assert read(tool, "cnc-7", "vibration")["fallback_reason"].startswith("timeout")  # the probe fails
        row = next(r for r in tool.gateway.store.all_breakers() if r.sensor == "*")
        assert tool.gateway.breakers.reopen_at_ms(row) - row.opened_at_ms == 600
    finally:
        tool.close()


def test_a_successful_poller_read_closes_the_breaker_inside_its_window(plant_devices, plc_sim, tmp_path):
    cache = tmp_path / "c.sqlite"
    tool = PlcReadTool(plant_devices, PlcConfig(read_budget_ms=200), cache)
    poller = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), cache)
    try:
        plc_sim.silence("press-3")
        for _ in range(3):
            read(tool, "press-3", "motor_temp")
        assert "breaker open" in read(tool, "press-3", "motor_temp")["fallback_reason"]
        assert poll_once(poller).no_communication == 1  # the poller probes the open unit, once
        plc_sim.silence("press-3", on=False)
        report = poll_once(poller)
        assert report.refreshed == 9 and report.skipped == 0
        # Well inside the 10 s window in which the tool itself would not probe, its reads are live again.
        assert tool.gateway.store.all_breakers() == []
        assert read(tool, "press-3", "motor_temp")["source"] == "live"
    finally:
        poller.close()
        tool.close()
