"""A sensor reading as the tool reports it, and the data-quality rules.

Qualities follow OPC UA status codes: `Good` for a live value,
`UncertainNoCommunicationLastUsableValue` for a cached one young enough to
use, `BadNoCommunication` when there is nothing usable (the value is withheld).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from tools.plant import SensorConfig

Quality = Literal["Good", "UncertainNoCommunicationLastUsableValue", "BadNoCommunication"]
Source = Literal["live", "cache_fallback"]
Alarm = Literal["high", "low"]


class Reading(BaseModel):
    device_id: str
    sensor: str
    label: str
    value: float | None
    unit: str
    ts_ms: int | None
    age_s: float | None
    quality: Quality
    source: Source
    is_outlier: bool = False
    alarm: Alarm | None = None
    plausible_min: float
    plausible_max: float
    # Why the live read did not answer (timeout, unreachable, breaker open); None when live.
    fallback_reason: str | None = None
    # When an open breaker lets the network be tried again (epoch ms).
    breaker_probe_after_ms: int | None = None


def is_outlier(sensor: SensorConfig, value: float) -> bool:
    return not sensor.plausible_min <= value <= sensor.plausible_max


def alarm_for(sensor: SensorConfig, value: float) -> Alarm | None:
    """Alarm thresholds apply to plausible values only: a broken sensor raises no alarm."""
    if is_outlier(sensor, value):
        return None
    if sensor.alarm_high is not None and value >= sensor.alarm_high:
        return "high"
    if sensor.alarm_low is not None and value <= sensor.alarm_low:
        return "low"
    return None


def fallback_quality(age_s: float | None, max_age_s: float) -> Quality:
    if age_s is None or age_s > max_age_s:
        return "BadNoCommunication"
    return "UncertainNoCommunicationLastUsableValue"
