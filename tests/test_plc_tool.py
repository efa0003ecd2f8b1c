"""read_plc_sensor_value against the real simulator over loopback Modbus TCP."""

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tools.contract import ToolContext
from tools.plc.config import PlcConfig
from tools.plc.tool import PlcReadArgs, PlcReadTool
from tools.registry import ToolRegistry

CTX = ToolContext(request_id="req-1", run_id="run-1", loop_step=1)


def ask(tool: PlcReadTool, device: str, sensor: str):
    return tool.run(PlcReadArgs(device_id=device, sensor=sensor), CTX)


def fields(output) -> dict:
    (item,) = [i for i in output.items if i.kind == "ref"]
    return item.fields


def test_live_read_carries_value_unit_timestamp_and_quality(plc_tool, plc_sim):
    out = ask(plc_tool, "press-3", "coolant_level")
    f = fields(out)
    assert out.status == "ok" and out.suggestion is None
    assert f["source"] == "live" and f["quality"] == "Good"
    assert f["unit"] == "%" and f["ts_ms"] > 0 and f["timestamp"] and f["age_s"] < 5
    assert f["value"] == pytest.approx(plc_sim.value("press-3", "coolant_level"), abs=0.2)
    assert 20 < f["value"] < 100 and f["is_outlier"] is False and f["alarm"] is None
    assert "Coolant level on press-3" in out.items[0].text and "%" in out.items[0].text


@pytest.mark.parametrize(
    "device,sensor,expected",
    [
        ("press-3", "motor_temp", "motor_temp"),
        ("Press 3", "Motor Temperature", "motor_temp"),
        ("press-3", "冷却液", "coolant_level"),
        ("3号液压机", "液压压力", "hydraulic_pressure"),
        ("CNC-7", "rpm", "spindle_speed"),
        ("cnc-7", "振动", "vibration"),
    ],
)
def test_synonyms_resolve_case_insensitively_in_english_and_chinese(plc_tool, device, sensor, expected):
    out = ask(plc_tool, device, sensor)
    assert out.status == "ok"
    assert fields(out)["sensor"] == expected


def test_default_simulated_values_sit_inside_the_normal_band(plc_tool, plant_devices):
    for device_id, device in plant_devices.items():
        for sensor_id in device.sensors:
            f = fields(ask(plc_tool, device_id, sensor_id))
            assert f["is_outlier"] is False and f["alarm"] is None, (device_id, sensor_id, f["value"])


def test_unknown_device_lists_the_known_ones(plc_tool):
    out = ask(plc_tool, "press-9", "coolant_level")
    assert out.status == "error" and out.error_code == "unknown_device"
    assert "press-3, cnc-7" in out.items[0].text


def test_unknown_sensor_lists_the_device_sensors_and_the_closest(plc_tool):
    out = ask(plc_tool, "press-3", "coolant lvl")
    assert out.error_code == "unknown_sensor"
    assert "motor_temp, coolant_level, hydraulic_pressure, oil_temp" in out.items[0].text
    assert "'coolant_level'" in out.suggestion


def test_out_of_range_value_is_flagged_as_suspected_sensor_fault(plc_tool, plc_sim):
    plc_sim.set_value("press-3", "motor_temp", 3000.0)
    out = ask(plc_tool, "press-3", "motor_temp")
    f = fields(out)
    assert f["value"] == 3000.0 and f["is_outlier"] is True and f["alarm"] is None
    assert f["plausible_range"] == [-20, 150]
    assert "confirm on site whether the sensor has failed" in out.suggestion
    assert "suspected sensor fault" in out.items[0].text
    assert out.confidence < 0.5


def test_value_below_minus_20_is_an_outlier_too(plc_tool, plc_sim):
    plc_sim.set_value("press-3", "oil_temp", -25.0)
    assert fields(ask(plc_tool, "press-3", "oil_temp"))["is_outlier"] is True


def test_drift_past_alarm_threshold_is_flagged(plc_tool, plc_sim):
    plc_sim.drift("cnc-7", "coolant_level", target=10.0, per_s=200.0)
    time.sleep(0.4)  # 80 %-points at most separate the start from the target
    out = ask(plc_tool, "cnc-7", "coolant_level")
    f = fields(out)
    assert f["value"] == pytest.approx(10.0) and f["alarm"] == "low" and f["is_outlier"] is False
    assert "low alarm threshold" in out.items[0].text


def test_modbus_exception_is_an_error_naming_it(plc_tool, plc_sim):
    plc_sim.exception("cnc-7", "vibration", 4)
    out = ask(plc_tool, "cnc-7", "vibration")
    assert out.status == "error" and out.error_code == "modbus_exception"
    assert "SERVER DEVICE FAILURE" in out.items[0].text and "SERVER DEVICE FAILURE" in out.suggestion
    plc_sim.exception("cnc-7", "vibration", None)
    assert ask(plc_tool, "cnc-7", "vibration").status == "ok"


def test_malformed_reply_is_an_error(plc_tool, plc_sim):
    plc_sim.malformed("cnc-7")
    out = ask(plc_tool, "cnc-7", "spindle_speed")
    assert out.error_code == "malformed_reply"
    assert "expected 2 register(s)" in out.items[0].text
    plc_sim.malformed("cnc-7", on=False)
    assert ask(plc_tool, "cnc-7", "spindle_speed").status == "ok"


def test_silent_plc_falls_back_to_cache_with_age(plc_tool, plc_sim):
    live = fields(ask(plc_tool, "press-3", "coolant_level"))
    plc_sim.silence("press-3")
    out = ask(plc_tool, "press-3", "coolant_level")
    f = fields(out)
    assert out.status == "degraded"
    assert f["source"] == "cache_fallback" and f["quality"] == "UncertainNoCommunicationLastUsableValue"
    assert f["value"] == live["value"] and f["ts_ms"] == live["ts_ms"] and f["age_s"] >= 0
    assert f["fallback_reason"].startswith("timeout")
    assert "from the cache" in out.items[0].text and "old" in out.items[0].text


def test_slow_plc_beyond_budget_falls_back(plc_tool, plc_sim):
    ask(plc_tool, "press-3", "hydraulic_pressure")
    plc_sim.slow("press-3", 1.0)
    f = fields(ask(plc_tool, "press-3", "hydraulic_pressure"))
    assert f["source"] == "cache_fallback" and f["fallback_reason"].startswith("timeout")
    plc_sim.slow("press-3", 0.0)
    assert fields(ask(plc_tool, "press-3", "hydraulic_pressure"))["source"] == "live"


def test_stopped_simulator_answers_from_cache(plc_tool, plc_sim):
    ask(plc_tool, "cnc-7", "spindle_temp")
    plc_sim.stop()
    out = ask(plc_tool, "cnc-7", "spindle_temp")
    f = fields(out)
    assert out.status == "degraded" and f["source"] == "cache_fallback"
    assert f["fallback_reason"].startswith("unreachable")


def test_value_is_withheld_when_cache_is_empty(plc_tool, plc_sim):
    plc_sim.silence("press-3")
    out = ask(plc_tool, "press-3", "oil_temp")
    f = fields(out)
    assert out.status == "error" and out.error_code == "no_communication"
    assert f["quality"] == "BadNoCommunication" and f["value"] is None and f["ts_ms"] is None
    assert "Do not estimate" in out.suggestion


def test_value_is_withheld_when_cache_is_too_old(plant_devices, plc_sim, tmp_path):
    tool = PlcReadTool(plant_devices, PlcConfig(read_budget_ms=250, cache_max_age_s=0.05), tmp_path / "c.sqlite")
    try:
        ask(tool, "press-3", "coolant_level")
        plc_sim.silence("press-3")
        time.sleep(0.1)
        out = ask(tool, "press-3", "coolant_level")
        f = fields(out)
        assert f["quality"] == "BadNoCommunication" and f["value"] is None and f["ts_ms"] is not None
        assert "too old to use" in out.items[0].text
    finally:
        tool.close()


def test_concurrent_reads_share_one_connection_safely(plc_tool, plant_devices):
    pairs = [(d, s) for d, dev in plant_devices.items() for s in dev.sensors] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        outs = list(pool.map(lambda p: ask(plc_tool, *p), pairs))
    assert [fields(o)["quality"] for o in outs] == ["Good"] * len(pairs)
    assert [fields(o)["sensor"] for o in outs] == [s for _, s in pairs]


def test_registry_call_keeps_every_reading_field(plc_tool):
    registry = ToolRegistry([plc_tool])
    try:
        obs = registry.call("read_plc_sensor_value", {"device_id": "press-3", "sensor": "motor_temp"}, CTX, "obs-1")
    finally:
        registry.close()
    assert obs.status == "ok" and obs.dropped_fields == []
    fields = obs.content[0].fields
    for key in ("value", "unit", "ts_ms", "age_s", "quality", "source", "is_outlier", "alarm", "plausible_range"):
        assert key in fields
    payload = obs.payload()["content"][0]  # what the model reads
    for key in ("value", "unit", "timestamp", "age_s", "quality", "source", "is_outlier", "plausible_range"):
        assert key in payload
    assert plc_tool.timeout_s == pytest.approx(0.45)


def test_registry_rejects_missing_sensor_argument_with_a_hint(plc_tool):
    registry = ToolRegistry([plc_tool])
    try:
        obs = registry.call("read_plc_sensor_value", {"device_id": "press-3"}, CTX, "obs-1")
    finally:
        registry.close()
    assert obs.error_code == "invalid_arguments" and "coolant_level" in obs.suggestion


def test_tool_without_devices_fails_at_start(tmp_path):
    with pytest.raises(ValueError, match="at least one device"):
        PlcReadTool({}, PlcConfig(), tmp_path / "c.sqlite")


def test_live_value_is_returned_when_the_cache_cannot_be_written(plc_tool, plc_sim, tmp_path):
    # The poller (another process) holds the write lock longer than the tool may wait.
    holder = sqlite3.connect(tmp_path / "plc_cache.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        out = ask(plc_tool, "press-3", "coolant_level")
    finally:
        holder.rollback()
        holder.close()
    assert out.status == "ok" and fields(out)["source"] == "live"
    assert fields(out)["value"] == pytest.approx(plc_sim.value("press-3", "coolant_level"), abs=0.2)
    assert plc_tool.gateway.store.get_reading("press-3", "coolant_level") is None
