"""Sensor history: every reading kept for a while and bounded, its trend, and the trend in the answer."""

from __future__ import annotations

import math
import random
import sqlite3
import time

import pytest

from edge.config import ConfigError, load_config
from edge.run import build_document, render_text
from edge.run.grounding import collect_evidence, ungrounded
from tools.contract import ToolContext
from tools.plant import UnknownDevice
from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway
from tools.plc.history import UnknownSensor, sensor_history
from tools.plc.poller import poll_once
from tools.plc.store import HistoryLimits, HistoryPoint, PlcStore
from tools.plc.trend import trend
from tools.registry import ToolRegistry

CTX = ToolContext(request_id="req-1", run_id="run-1", loop_step=1)
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
T0 = 1_800_000_000_000


def demo_sensor(device: str = "press-3", sensor: str = "motor_temp"):
    return load_config(env={}).devices[device].sensors[sensor]


def series(values, start_ms: int = T0, step_ms: int = 30_000) -> list[HistoryPoint]:
    return [HistoryPoint(start_ms + i * step_ms, v) for i, v in enumerate(values)]


def stored(path, device="press-3", sensor="motor_temp") -> list[tuple[int, float]]:
    """The rows as they are on disk, not as a query of ours filters them."""
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT ts_ms, value FROM history WHERE device_id = ? AND sensor = ? ORDER BY ts_ms", (device, sensor)
        ).fetchall()


@pytest.fixture
def plc_registry(plc_tool):
    registry = ToolRegistry([plc_tool])
    yield registry
    registry.close()


def read(registry, sensor: str = "motor_temp"):
    return registry.call("read_plc_sensor_value", {"device_id": "press-3", "sensor": sensor}, CTX, "obs-1")


# -- written by polls and reads, bounded ---------------------------------------------------------------


def test_each_poll_appends_a_reading_to_every_sensors_history(plant_devices, plc_sim, tmp_path):
    gateway = PlcGateway(plant_devices, PlcConfig(read_budget_ms=200), tmp_path / "c.sqlite")
    try:
        poll_once(gateway)
        poll_once(gateway)
        for device_id, device in plant_devices.items():
            for sensor_id in device.sensors:
                points = gateway.store.history(device_id, sensor_id, 0, T0)
                latest = gateway.store.get_reading(device_id, sensor_id)
                assert len(points) == 2 and points[0].ts_ms <= points[1].ts_ms
                assert points[-1] == (latest.ts_ms, latest.value)
    finally:
        gateway.close()


def test_a_tool_read_appends_its_live_value_to_the_history(plc_tool, plc_registry, plc_sim):
    plc_sim.set_value("press-3", "coolant_level", 64.5)
    f = read(plc_registry, "coolant").content[0].fields
    assert plc_tool.gateway.store.history("press-3", "coolant_level", 0, T0) == [(f["ts_ms"], 64.5)]


def test_readings_older_than_the_retention_window_are_pruned_as_new_ones_arrive(tmp_path):
    store = PlcStore(tmp_path / "c.sqlite", history=HistoryLimits(retention_ms=10 * MINUTE_MS, max_rows=1000))
    try:
        for minute in range(16):
            store.put_reading("press-3", "motor_temp", 50.0 + minute, T0 + minute * MINUTE_MS)
        store.put_reading("press-3", "oil_temp", 40.0, T0)
    finally:
        store.close()
    rows = stored(tmp_path / "c.sqlite")
    assert [ts for ts, _ in rows] == [T0 + m * MINUTE_MS for m in range(5, 16)]
    # Pruning is per sensor: a sensor that was not written keeps its own history.
    assert stored(tmp_path / "c.sqlite", sensor="oil_temp") == [(T0, 40.0)]


def test_a_sensor_read_faster_than_expected_keeps_only_its_newest_rows_up_to_the_cap(tmp_path):
    store = PlcStore(tmp_path / "c.sqlite", history=HistoryLimits(retention_ms=86_400_000, max_rows=5))
    try:
        for i in range(12):
            store.put_reading("press-3", "motor_temp", float(i), T0 + i * 100)
        assert [p.value for p in store.history("press-3", "motor_temp", 0, T0 + 10_000)] == [7.0, 8.0, 9.0, 10.0, 11.0]
    finally:
        store.close()
    assert len(stored(tmp_path / "c.sqlite")) == 5


def test_the_plc_config_sets_the_limits_the_poller_prunes_by(plant_devices, plc_sim, tmp_path):
    config = PlcConfig(read_budget_ms=200, poll_interval_s=3600, history_retention_s=3600, history_max_rows=2)
    gateway = PlcGateway(plant_devices, config, tmp_path / "c.sqlite")
    try:
        assert gateway.store.history_limits == HistoryLimits(retention_ms=3_600_000, max_rows=2)
        for _ in range(3):
            poll_once(gateway)
    finally:
        gateway.close()
    assert len(stored(tmp_path / "c.sqlite", "cnc-7", "vibration")) == 2


def test_a_cap_too_small_for_the_retention_window_is_a_config_error_saying_what_to_change(tmp_path):
    path = tmp_path / "plant.toml"
    path.write_text("[plc]\npoll_interval_s = 10\nhistory_max_rows = 5000\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    message = str(err.value)
    assert "plc: " in message and "history_max_rows (5000)" in message and "poll_interval_s (10 s)" in message
    assert (
        "needs 8641 rows per sensor" in message and "raise history_max_rows or shorten history_retention_s" in message
    )


def test_a_retention_shorter_than_the_trend_hour_is_a_config_error(tmp_path):
    path = tmp_path / "plant.toml"
    path.write_text("[plc]\nhistory_retention_s = 600\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"plc.history_retention_s: Input should be greater than or equal to 3600"):
        load_config(path, env={})


def test_no_statement_on_the_history_scans_a_sensors_rows(tmp_path):
    store = PlcStore(tmp_path / "c.sqlite", history=HistoryLimits(retention_ms=HOUR_MS, max_rows=100))
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # the statements the store really runs, values bound
    try:
        for i in range(3):
            store.put_reading("press-3", "motor_temp", 50.0, T0 + i * 1000)
        store.history("press-3", "motor_temp", T0, T0 + HOUR_MS)
    finally:
        store.close()
    on_history = [s for s in statements if " history " in s and not s.lstrip().startswith("INSERT")]
    assert len(on_history) == 3 * 3 + 1  # per write: last seq, prune by age, prune by cap; then the query
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        for sql in on_history:
            plan = " | ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql))
            assert plan.startswith("SEARCH history USING") and "SCAN" not in plan, (sql, plan)
            assert "ts_ms" in plan or "seq" in plan or "LIMIT" in sql, (sql, plan)


# -- the trend -------------------------------------------------------------------------------------------


def test_a_steady_climb_through_noise_is_rising_with_its_slope_per_minute():
    noise = random.Random(1)
    points = series([50 + 0.2 * i / 2 + noise.gauss(0, 0.3) for i in range(120)])  # 0.2 °C/min, every 30 s
    result = trend(points, demo_sensor())
    assert result.direction == "rising" and result.slope_per_min == pytest.approx(0.2, rel=0.1)
    assert result.window_s == 119 * 30 and result.points == 120


def test_a_draining_level_is_falling():
    result = trend(series([80 - 0.5 * i for i in range(20)], step_ms=MINUTE_MS), demo_sensor("cnc-7", "coolant_level"))
    assert result.direction == "falling" and result.slope_per_min == pytest.approx(-0.5)


def test_noise_around_a_flat_value_is_steady():
    noise = random.Random(2)
    result = trend(series([55 + noise.gauss(0, 2.0) for _ in range(120)]), demo_sensor())
    assert result.direction == "steady" and result.slope_per_min is not None


def test_a_real_but_tiny_drift_is_steady_against_the_alarm_band():
    # 0.5 °C over an hour with no noise at all: a real slope, immaterial on a 105 °C band.
    result = trend(series([50 + 0.5 * i / 119 for i in range(120)]), demo_sensor())
    assert result.direction == "steady"


def test_one_spike_does_not_make_a_flat_series_rise():
    noise = random.Random(3)
    values = [50 + noise.gauss(0, 0.2) for _ in range(119)] + [80.0]
    assert trend(series(values), demo_sensor()).direction == "steady"


def test_a_spike_does_not_bend_a_real_fall():
    values = [80 - 0.3 * i for i in range(60)]
    values[55] = 5.0
    result = trend(series(values, step_ms=MINUTE_MS), demo_sensor("cnc-7", "coolant_level"))
    assert result.direction == "falling" and result.slope_per_min == pytest.approx(-0.3)


def test_readings_outside_the_plausible_range_do_not_count():
    values = [50.0, 3000.0, 50.1, 3000.0, 49.9, 3000.0, 50.0, 3000.0, 50.1]
    result = trend(series(values, step_ms=MINUTE_MS), demo_sensor())
    assert result.direction == "steady" and result.points == 5


@pytest.mark.parametrize(
    "points",
    [
        [],
        series([50.0, 60.0, 70.0, 80.0], step_ms=MINUTE_MS),  # four readings
        series([50.0, 60.0, 70.0, 80.0, 90.0, 100.0], step_ms=10_000),  # six readings within 50 s
    ],
)
def test_too_little_history_is_unknown(points):
    result = trend(points, demo_sensor())
    assert result.direction == "unknown" and result.slope_per_min is None


# -- the history the tablet draws ------------------------------------------------------------------------


def test_sensor_history_carries_the_window_the_unit_the_alarm_limits_and_the_trend(tmp_path):
    devices = load_config(env={}).devices
    store = PlcStore(tmp_path / "c.sqlite")
    now = T0 + 24 * 60 * MINUTE_MS
    try:
        for minute in range(0, 24 * 60, 2):
            store.put_reading("cnc-7", "coolant_level", 90 - minute * 0.05, T0 + minute * MINUTE_MS)
        last_hour = sensor_history(store, devices, "cnc-7", "coolant_level", now_ms=now)
        day = sensor_history(store, devices, "cnc-7", "coolant_level", window_s=86_400, now_ms=now)
    finally:
        store.close()
    assert (last_hour.unit, last_hour.alarm_low, last_hour.alarm_high) == ("%", 20, None)
    assert (last_hour.plausible_min, last_hour.plausible_max, last_hour.label_zh) == (0, 100, "冷却液液位")
    assert len(last_hour.points) == 30 and all(p.ts_ms >= now - 60 * MINUTE_MS for p in last_hour.points)
    assert len(day.points) == 720 and day.points[0].ts_ms == T0
    assert last_hour.trend == day.trend and day.trend.direction == "falling"
    assert day.trend.slope_per_min == pytest.approx(-0.05)
    assert '"points":[[' in last_hour.model_dump_json()


def test_sensor_history_names_an_unknown_device_or_sensor_and_refuses_an_empty_window(tmp_path):
    devices = load_config(env={}).devices
    store = PlcStore(tmp_path / "c.sqlite")
    try:
        with pytest.raises(UnknownDevice, match="press-9"):
            sensor_history(store, devices, "press-9", "motor_temp")
        with pytest.raises(UnknownSensor, match="has no sensor 'rpm'; its sensors: motor_temp, coolant_level"):
            sensor_history(store, devices, "press-3", "rpm")
        with pytest.raises(ValueError, match="window_s must be a positive number"):
            sensor_history(store, devices, "press-3", "motor_temp", window_s=0)
    finally:
        store.close()


# -- the observation and the answer ----------------------------------------------------------------------


def heating_motor(plc_tool, plc_sim, per_min: float = 0.4) -> None:
    """Half an hour of a motor warming up, then the live value continuing the line."""
    now = int(time.time() * 1000)
    for minute in range(30, 0, -1):
        plc_tool.gateway.store.put_reading("press-3", "motor_temp", 60 - per_min * minute, now - minute * MINUTE_MS)
    plc_sim.set_value("press-3", "motor_temp", 60.0)


def test_a_reading_carries_its_trend_for_the_model(plc_tool, plc_registry, plc_sim):
    heating_motor(plc_tool, plc_sim)
    obs = read(plc_registry)
    f = obs.content[0].fields
    assert obs.dropped_fields == []
    assert f["trend"] == "rising" and f["trend_slope_per_min"] == pytest.approx(0.4, rel=0.02)
    assert 30 * 60 - 5 <= f["trend_window_s"] <= 30 * 60 + 5
    payload = obs.payload()["content"][0]
    assert {"trend", "trend_slope_per_min", "trend_window_s"} <= payload.keys()
    assert "Rising at +0.4" in obs.content[0].text


def test_a_first_reading_has_an_unknown_trend_and_a_suspect_one_none(plc_tool, plc_registry, plc_sim):
    f = read(plc_registry).content[0].fields
    assert f["trend"] == "unknown" and f["trend_slope_per_min"] is None and f["trend_window_s"] is None
    plc_sim.set_value("press-3", "motor_temp", 3000.0)
    f = read(plc_registry).content[0].fields
    assert f["is_outlier"] is True and f["trend"] is None


def test_the_english_answer_says_the_value_is_rising_and_passes_the_grounding_check(plc_tool, plc_registry, plc_sim):
    heating_motor(plc_tool, plc_sim)
    obs = read(plc_registry)
    question = "How hot is the motor of press-3?"
    answer = render_text(build_document(question, [obs]))
    slope = obs.content[0].fields["trend_slope_per_min"]
    assert f"rising, +{slope:g} °C/min over the last 30 min" in answer
    assert ungrounded(answer, collect_evidence([obs], question, plc_tool.devices)) == []


def test_the_chinese_answer_says_the_value_is_falling_and_passes_the_grounding_check(plc_tool, plc_registry, plc_sim):
    now = int(time.time() * 1000)
    for minute in range(40, 0, -1):
        plc_tool.gateway.store.put_reading("press-3", "coolant_level", 50 + 0.25 * minute, now - minute * MINUTE_MS)
    plc_sim.set_value("press-3", "coolant_level", 50.0)
    obs = read(plc_registry, "coolant_level")
    question = "3号液压机的冷却液液位是多少？"
    answer = render_text(build_document(question, [obs]))
    slope = obs.content[0].fields["trend_slope_per_min"]
    assert math.isclose(slope, -0.25, rel_tol=0.02)
    assert f"近 40 min 持续下降（每分钟 {slope:g} %）" in answer
    assert ungrounded(answer, collect_evidence([obs], question, plc_tool.devices)) == []


def test_a_steady_value_is_said_steady_in_both_languages(plc_tool, plc_registry, plc_sim):
    now = int(time.time() * 1000)
    for minute in range(59, 0, -1):
        plc_tool.gateway.store.put_reading(
            "press-3", "oil_temp", 45.0 + (0.1 if minute % 2 else -0.1), now - minute * MINUTE_MS
        )
    plc_sim.set_value("press-3", "oil_temp", 45.0)
    obs = read(plc_registry, "oil_temp")
    for question, words in (
        ("oil temperature of press-3?", "steady over the last 59 min"),
        ("3号液压机油温多少？", "近 59 min 保持平稳"),
    ):
        answer = render_text(build_document(question, [obs]))
        assert words in answer
        assert ungrounded(answer, collect_evidence([obs], question, plc_tool.devices)) == []
