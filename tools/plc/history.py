"""A sensor's recent readings as a chart draws them: the points, with the unit, alarm limits and trend.

`sensor_history` is what `GET /v1/devices/{id}/sensors/{sensor}/history` answers with;
`recent_trend` is the trend the PLC tool attaches to a reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel

from tools.observation import now_ms as current_ms
from tools.plant import DeviceConfig, SensorConfig, require
from tools.plc.store import HistoryPoint, PlcStore
from tools.plc.trend import TREND_WINDOW_S, Trend, trend


class UnknownSensor(ValueError):
    """A sensor id the device does not have; the message lists the ones it has."""

    def __init__(self, device_id: str, sensor_id: str, known: Iterable[str]):
        super().__init__(f"device {device_id!r} has no sensor {sensor_id!r}; its sensors: {', '.join(known)}")
        self.device_id = device_id
        self.sensor_id = sensor_id


class SensorHistory(BaseModel):
    device_id: str
    sensor: str
    label: str
    label_zh: str
    unit: str
    alarm_low: float | None
    alarm_high: float | None
    plausible_min: float
    plausible_max: float
    since_ms: int
    until_ms: int
    # Oldest first, each `[ts_ms, value]`.
    points: list[HistoryPoint]
    # Over the last hour up to `until_ms`, whatever the window.
    trend: Trend


def sensor_history(
    store: PlcStore,
    devices: Mapping[str, DeviceConfig],
    device_id: str,
    sensor_id: str,
    window_s: float = TREND_WINDOW_S,
    now_ms: int | None = None,
) -> SensorHistory:
    """The readings of the last `window_s` seconds up to `now_ms` (default: now).

    Raises `UnknownDevice` / `UnknownSensor` (both `ValueError`) for ids the plant does not have, and
    `ValueError` for a window that is not positive.
    """
    if not window_s > 0:
        raise ValueError(f"window_s must be a positive number of seconds, not {window_s}")
    device = require(devices, device_id)
    sensor = device.sensors.get(sensor_id)
    if sensor is None:
        raise UnknownSensor(device_id, sensor_id, device.sensors)
    until_ms = current_ms() if now_ms is None else now_ms
    since_ms = until_ms - int(window_s * 1000)
    return SensorHistory.model_construct(
        device_id=device_id,
        sensor=sensor_id,
        label=sensor.label or sensor_id,
        label_zh=sensor.label_zh,
        unit=sensor.unit,
        alarm_low=sensor.alarm_low,
        alarm_high=sensor.alarm_high,
        plausible_min=sensor.plausible_min,
        plausible_max=sensor.plausible_max,
        since_ms=since_ms,
        until_ms=until_ms,
        # Built from our own store and config: validating thousands of points again would cost more than the query.
        points=store.history(device_id, sensor_id, since_ms, until_ms),
        trend=recent_trend(store, device_id, sensor, until_ms),
    )


def recent_trend(store: PlcStore, device_id: str, sensor: SensorConfig, until_ms: int) -> Trend:
    """The trend of the hour of readings up to `until_ms`."""
    return trend(store.history(device_id, sensor.id, until_ms - TREND_WINDOW_S * 1000, until_ms), sensor)
