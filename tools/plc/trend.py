"""Is a sensor rising, falling or steady? A least-squares slope over its recent history.

A slope counts only when it is both real and material. Real: it stands out from the series' own
noise (t-statistic of the slope, after one refit without the readings far off the line, so a
single spike does not tilt it). Material: over the window it moves the value by a share of the
sensor's alarm band, so a 0.1 °C drift in an hour is "steady" on a motor, whatever the noise.
Readings outside the plausible range (a failed sensor) never count.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from tools.plant import SensorConfig
from tools.plc.store import HistoryPoint

Direction = Literal["rising", "falling", "steady", "unknown"]

TREND_WINDOW_S = 3600
# Fewer readings, or a shorter span, say nothing about a direction.
MIN_POINTS = 5
MIN_SPAN_S = 120
# |slope| / its standard error: below this the slope is noise.
MIN_T = 3.0
# The change over the window, as a share of the alarm band, below which a real slope is still "steady".
MATERIAL_SHARE = 0.02
# Residuals beyond this many robust standard deviations (1.4826 × MAD) are left out of the refit.
OUTLIER_SIGMAS = 5.0


class Trend(BaseModel):
    direction: Direction
    # In the sensor's unit per minute, 3 significant digits (what an answer may print); None when unknown.
    slope_per_min: float | None = None
    # The span of the readings used, first to last (seconds).
    window_s: int = 0
    points: int = 0


def trend(points: Sequence[HistoryPoint], sensor: SensorConfig) -> Trend:
    """The direction of `points` (oldest first, as `PlcStore.history` returns them)."""
    usable = [p for p in points if sensor.plausible_min <= p.value <= sensor.plausible_max]
    span_s = (usable[-1].ts_ms - usable[0].ts_ms) / 1000 if usable else 0.0
    if len(usable) < MIN_POINTS or span_s < MIN_SPAN_S:
        return Trend(direction="unknown", window_s=round(span_s), points=len(usable))
    minutes = [(p.ts_ms - usable[0].ts_ms) / 60000 for p in usable]
    values = [p.value for p in usable]
    slope, t = _fit(minutes, values)
    # Offsets from a line of that slope; their median is the intercept a spike cannot pull.
    residuals = [v - slope * m for m, v in zip(minutes, values)]
    centre = statistics.median(residuals)
    spread = OUTLIER_SIGMAS * 1.4826 * statistics.median(abs(r - centre) for r in residuals)
    kept = [i for i, r in enumerate(residuals) if abs(r - centre) <= spread]
    if spread > 0 and MIN_POINTS <= len(kept) < len(usable):
        slope, t = _fit([minutes[i] for i in kept], [values[i] for i in kept])
    material = abs(slope) * span_s / 60 >= MATERIAL_SHARE * alarm_band(sensor)
    direction: Direction = "steady"
    if t >= MIN_T and material:
        direction = "rising" if slope > 0 else "falling"
    return Trend(direction=direction, slope_per_min=_significant(slope), window_s=round(span_s), points=len(usable))


def alarm_band(sensor: SensorConfig) -> float:
    """The room a value has between its alarm limits, the plausible range standing in for a missing one."""
    low = sensor.plausible_min if sensor.alarm_low is None else sensor.alarm_low
    high = sensor.plausible_max if sensor.alarm_high is None else sensor.alarm_high
    return high - low


def _fit(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares slope and its t-statistic (infinite for a perfect line with a slope)."""
    n = len(x)
    mean_x, mean_y = sum(x) / n, sum(y) / n
    sxx = sum((a - mean_x) ** 2 for a in x)
    slope = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y)) / sxx
    intercept = mean_y - slope * mean_x
    ssr = sum((b - intercept - slope * a) ** 2 for a, b in zip(x, y))
    standard_error = math.sqrt(ssr / (n - 2) / sxx)
    if standard_error == 0:
        return slope, math.inf if slope else 0.0
    return slope, abs(slope) / standard_error


def _significant(value: float, digits: int = 3) -> float:
    if value == 0 or not math.isfinite(value):
        return 0.0
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))
