"""`read_plc_sensor_value`: one sensor's value, with its quality, for the agent."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tools.contract import Item, Status, Tool, ToolContext, ToolOutput
from tools.plant import DeviceConfig, SensorConfig, find_device, unknown_device
from tools.plc.config import PlcConfig
from tools.plc.errors import MalformedReply, ModbusExceptionReply
from tools.plc.gateway import PlcGateway
from tools.plc.history import recent_trend
from tools.plc.lookup import closest_sensor, find_sensor
from tools.plc.reading import Reading
from tools.plc.trend import Trend

log = logging.getLogger("fixloop.plc")

OUTLIER_SUGGESTION = (
    "The value is outside the sensor's plausible range: confirm on site whether the sensor has failed "
    "before reasoning from it."
)
# After a timed-out read the tool writes twice (sensor and unit breaker): both waits must fit in
# the 0.2 s left after the read budget, while the poller writing the same file waits much longer.
STORE_BUSY_TIMEOUT_S = 0.05
CONFIDENCE = {"Good": 1.0, "UncertainNoCommunicationLastUsableValue": 0.6, "BadNoCommunication": 0.0}


class PlcReadArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: str = Field(
        min_length=1,
        max_length=80,
        description="Device id from the plant list, like press-3 or cnc-7.",
        examples=["press-3"],
    )
    sensor: str = Field(
        min_length=1,
        max_length=80,
        description="Sensor id from the plant list, like coolant_level or motor_temp; a synonym also works.",
        examples=["coolant_level"],
    )


class PlcReadTool(Tool):
    name = "read_plc_sensor_value"
    description = (
        "Read one sensor of a machine from its PLC right now: value, unit, timestamp, age and data quality. "
        "Use it for questions about a machine's current state (temperature, pressure, coolant level, speed, "
        "vibration). If the PLC does not answer, the last cached value comes back marked cache_fallback with its age. "
        "trend says whether the value is rising, falling or steady over the hour before it (trend_window_s), "
        "with its slope per minute."
    )
    input_model = PlcReadArgs
    output_fields = frozenset(
        {
            "device_id",
            "sensor",
            "label",
            "label_zh",
            "value",
            "unit",
            "ts_ms",
            "timestamp",
            "age_s",
            "quality",
            "source",
            "is_outlier",
            "alarm",
            "plausible_range",
            "alarm_low",
            "alarm_high",
            "zero_energy",
            "fallback_reason",
            "trend",
            "trend_slope_per_min",
            "trend_window_s",
        }
    )
    # The tablet's labels and the raw timestamp stay out of the prompt: `timestamp` and `age_s` say it for the model.
    prompt_fields = output_fields - {"label", "label_zh", "ts_ms"}
    timeout_s = 1.0

    def __init__(
        self,
        devices: dict[str, DeviceConfig],
        config: PlcConfig,
        cache_path: Path,
        on_breaker_open: Callable[[dict[str, Any]], None] | None = None,
    ):
        if not devices:
            raise ValueError("the PLC tool needs at least one device under [devices] in the config")
        self.devices = devices
        self.gateway = PlcGateway(devices, config, cache_path, on_breaker_open, busy_timeout_s=STORE_BUSY_TIMEOUT_S)
        # The read itself is bounded by the budget; the rest is the cache lookup and formatting.
        self.timeout_s = config.read_budget_ms / 1000 + 0.2  # type: ignore[misc]

    def close(self) -> None:
        self.gateway.close()

    def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        assert isinstance(args, PlcReadArgs)
        device_id = find_device(self.devices, args.device_id)
        if device_id is None:
            return unknown_device(self.devices, args.device_id, self.name)
        device = self.devices[device_id]
        sensor_id = find_sensor(device, args.sensor)
        if sensor_id is None:
            closest = closest_sensor(device, args.sensor)
            return ToolOutput.error(
                "unknown_sensor",
                f"Device {device_id} has no sensor {args.sensor!r}. Its sensors: {', '.join(device.sensors)}.",
                f"Did you mean {closest!r}? Use a sensor id exactly as listed.",
                source=self.name,
            )
        try:
            reading = self.gateway.read(device_id, sensor_id)
        except ModbusExceptionReply as exc:
            return ToolOutput.error(
                "modbus_exception",
                f"The PLC of {device_id} refused to read {sensor_id}: {exc}.",
                f"Do not retry now; say the PLC reported {exc.name} for this sensor and have the PLC "
                "or its register map checked.",
                source=self._source(device_id),
            )
        except MalformedReply as exc:
            return ToolOutput.error(
                "malformed_reply",
                f"The PLC of {device_id} answered for {sensor_id}, but not as the sensor map expects: {exc}.",
                "Do not retry now; say the reading is unavailable and that the PLC register map needs checking "
                "(e.g. after a firmware update).",
                source=self._source(device_id),
            )
        return self._output(reading)

    def _trend(self, reading: Reading) -> Trend | None:
        """The history leading up to a usable, plausible value; None for no value or a suspect one, whose
        trend would describe other readings than the one reported."""
        if reading.value is None or reading.is_outlier or reading.ts_ms is None:
            return None
        sensor = self.devices[reading.device_id].sensors[reading.sensor]
        try:
            return recent_trend(self.gateway.store, reading.device_id, sensor, reading.ts_ms)
        except sqlite3.Error:
            # As with a failed cache write: the reading is worth more than its trend.
            log.exception(
                "plc_history_read_failed %s/%s: reading returned without its trend", reading.device_id, reading.sensor
            )
            return None

    def _source(self, device_id: str) -> str:
        plc = self.devices[device_id].plc
        return f"modbus://{plc.host}:{plc.port}/{plc.unit_id}"

    def _output(self, reading: Reading) -> ToolOutput:
        sensor = self.devices[reading.device_id].sensors[reading.sensor]
        trend = self._trend(reading)
        item = Item(
            kind="ref",
            text=describe(reading, trend),
            fields={
                **_fields(reading),
                **_trend_fields(trend),
                **_limit_fields(self.devices[reading.device_id], sensor, reading),
                "label_zh": sensor.label_zh,
            },
        )
        source = self._source(reading.device_id)
        if reading.quality == "BadNoCommunication":
            return ToolOutput(
                status="error",
                items=[item],
                source=source,
                confidence=0.0,
                error_code="no_communication",
                suggestion=f"Say that no current value of {reading.label} is available and why; "
                f"have the PLC connection of {reading.device_id} checked on site. Do not estimate a value.",
            )
        suggestion = OUTLIER_SUGGESTION if reading.is_outlier else None
        confidence = 0.2 if reading.is_outlier else CONFIDENCE[reading.quality]
        status: Status = "ok" if reading.source == "live" else "degraded"
        if status == "degraded" and suggestion is None:
            suggestion = "Tell the user the value comes from the cache and how old it is."
        return ToolOutput(status=status, items=[item], source=source, confidence=confidence, suggestion=suggestion)


def _fields(reading: Reading) -> dict[str, Any]:
    return {
        "device_id": reading.device_id,
        "sensor": reading.sensor,
        "label": reading.label,
        "value": None if reading.value is None else round(reading.value, 3),
        "unit": reading.unit,
        "ts_ms": reading.ts_ms,
        "timestamp": _timestamp(reading.ts_ms),
        "age_s": None if reading.age_s is None else round(reading.age_s, 1),
        "quality": reading.quality,
        "source": reading.source,
        "is_outlier": reading.is_outlier,
        "alarm": reading.alarm,
        "plausible_range": [reading.plausible_min, reading.plausible_max],
        "fallback_reason": reading.fallback_reason,
    }


def _limit_fields(device: DeviceConfig, sensor: SensorConfig, reading: Reading) -> dict[str, Any]:
    """The limits the reading is judged by, so an answer can say them beside its verdict; for the device's
    zero-energy signal, the plant's rule and whether this value meets it (None without a usable value)."""
    fields: dict[str, Any] = {"alarm_low": sensor.alarm_low, "alarm_high": sensor.alarm_high, "zero_energy": None}
    signal = device.isolation.zero_energy if device.isolation else None
    if signal is not None and signal.sensor == sensor.id:
        usable = reading.value is not None and not reading.is_outlier
        fields["zero_energy"] = {
            **({"below": signal.below} if signal.below is not None else {"equals": signal.equals}),
            "met": signal.de_energised(reading.value) if usable and reading.value is not None else None,
        }
    return fields


def _trend_fields(trend: Trend | None) -> dict[str, Any]:
    if trend is None:
        return {"trend": None, "trend_slope_per_min": None, "trend_window_s": None}
    return {
        "trend": trend.direction,
        "trend_slope_per_min": trend.slope_per_min,
        "trend_window_s": trend.window_s if trend.direction != "unknown" else None,
    }


def describe(reading: Reading, trend: Trend | None = None) -> str:
    """One sentence a technician can read as it is."""
    what = f"{reading.label} on {reading.device_id}"
    if reading.value is None:
        if reading.ts_ms is None:
            last = "there is no cached value"
        else:
            last = f"the last cached value is {_age(reading.age_s)} old, too old to use"
        return f"No current value for {what}: the PLC did not answer ({reading.fallback_reason}) and {last}."
    value = f"{reading.value:.4g} {reading.unit}".rstrip()
    if reading.source == "live":
        text = f"{what}: {value} at {_timestamp(reading.ts_ms)} (live, quality Good)."
    else:
        text = (
            f"{what}: {value} from the cache, {_age(reading.age_s)} old (read at {_timestamp(reading.ts_ms)}); "
            f"the PLC did not answer ({reading.fallback_reason})."
        )
    if reading.is_outlier:
        text += (
            f" {value} is outside the plausible range {reading.plausible_min:g}..{reading.plausible_max:g} "
            f"{reading.unit}: suspected sensor fault."
        )
    elif reading.alarm is not None:
        text += f" This is past its {reading.alarm} alarm threshold."
    else:
        text += " This is within its alarm limits: a normal value."
    if trend is not None and trend.direction in ("rising", "falling"):
        text += f" {trend.direction.capitalize()} at {trend.slope_per_min:+g} {reading.unit}/min over {_age(trend.window_s)}."
    elif trend is not None and trend.direction == "steady":
        text += f" Steady over {_age(trend.window_s)}."
    return text


def _timestamp(ts_ms: int | None) -> str | None:
    if ts_ms is None:
        return None
    return datetime.fromtimestamp(ts_ms / 1000).astimezone().isoformat(timespec="seconds")


def _age(age_s: float | None) -> str:
    seconds = int(age_s or 0)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
