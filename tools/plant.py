"""The plant model from config: devices, their PLC connection and sensor map.

Shared by the PLC tool (register map), the manual tool (vendor/model scope),
the work-order tool (known devices) and the rules planner (synonyms).
Wrong entries fail at start-up with a message naming the entry.

The questions asked of the plant are answered here and nowhere else: which
device an id names (`require`, one `UnknownDevice` and its one message), which
manuals apply to it (`scope`), which Modbus endpoints serve it (`endpoints`),
and the same plant served by a simulator (`repoint`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from knowledge.models import Scope
from tools.contract import ToolOutput

DataType = Literal["int16", "uint16", "int32", "uint32", "float32"]
_REGISTER_WIDTH: dict[str, int] = {"int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2}


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlcEndpoint(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=502, ge=1, le=65535)
    unit_id: int = Field(default=1, ge=0, le=247)


class SensorConfig(Strict):
    id: str = ""
    label: str = ""
    label_zh: str = ""
    register_type: Literal["holding", "input"] = "holding"
    address: int = Field(ge=0, le=65535)
    data_type: DataType = "int16"
    word_order: Literal["big", "little"] = "big"
    scale: float = 1.0
    offset: float = 0.0
    unit: str = ""
    plausible_min: float
    plausible_max: float
    alarm_low: float | None = None
    alarm_high: float | None = None
    synonyms: list[str] = Field(default_factory=list)

    @property
    def width(self) -> int:
        return _REGISTER_WIDTH[self.data_type]

    @model_validator(mode="after")
    def _ranges_make_sense(self) -> SensorConfig:
        if self.plausible_min >= self.plausible_max:
            raise ValueError(f"plausible_min ({self.plausible_min}) must be below plausible_max ({self.plausible_max})")
        for name in ("alarm_low", "alarm_high"):
            threshold = getattr(self, name)
            # A threshold outside the plausible range could only ever fire on a broken sensor.
            if threshold is not None and not self.plausible_min <= threshold <= self.plausible_max:
                raise ValueError(
                    f"{name} ({threshold}) lies outside the plausible range {self.plausible_min}..{self.plausible_max}"
                )
        if self.address + self.width > 65536:
            raise ValueError(f"{self.data_type} at address {self.address} runs past the last register (65535)")
        return self


EnergySource = Literal["electrical", "hydraulic", "pneumatic", "mechanical", "thermal", "chemical", "gravity"]


class IsolationStep(Strict):
    text: str = Field(min_length=1, max_length=500)
    text_zh: str = Field(default="", max_length=500)

    def in_language(self, language: str | None) -> str:
        return self.text_zh if language == "zh" and self.text_zh else self.text


class ZeroEnergySignal(Strict):
    """A sensor of the device whose reading says it is de-energised: `below` a value (a DC-bus voltage
    under 30 V) or `equals` one (a main breaker's state 0)."""

    sensor: str = Field(min_length=1)
    below: float | None = None
    equals: float | None = None

    @model_validator(mode="after")
    def _one_condition(self) -> ZeroEnergySignal:
        if (self.below is None) == (self.equals is None):
            raise ValueError("zero_energy needs exactly one of below (e.g. below = 30) or equals (e.g. equals = 0)")
        return self

    def de_energised(self, value: float) -> bool:
        return value < self.below if self.below is not None else value == self.equals

    def condition(self) -> str:
        return f"below {self.below:g}" if self.below is not None else f"equal to {self.equals:g}"


class Isolation(Strict):
    """The plant's own lock-out for a device: what energy it holds, how to isolate it, and the reading that
    proves it is isolated (optional)."""

    energy_sources: list[EnergySource] = Field(min_length=1)
    steps: list[IsolationStep] = Field(min_length=1)
    zero_energy: ZeroEnergySignal | None = None


class DeviceConfig(Strict):
    id: str = ""
    name: str = ""
    name_zh: str = ""
    vendor: str = ""
    model: str = ""
    synonyms: list[str] = Field(default_factory=list)
    plc: PlcEndpoint = Field(default_factory=PlcEndpoint)
    sensors: dict[str, SensorConfig] = Field(default_factory=dict)
    isolation: Isolation | None = None

    @model_validator(mode="after")
    def _signal_is_a_sensor(self) -> DeviceConfig:
        signal = self.isolation.zero_energy if self.isolation else None
        if signal is not None and signal.sensor not in self.sensors:
            raise ValueError(
                f"isolation.zero_energy.sensor {signal.sensor!r} is not one of the device's sensors: "
                f"{', '.join(self.sensors) or '(none)'}"
            )
        return self

    @model_validator(mode="after")
    def _no_overlapping_registers(self) -> DeviceConfig:
        for sensor_id, sensor in self.sensors.items():
            if sensor.id and sensor.id != sensor_id:
                raise ValueError(f"sensor {sensor_id!r}: id {sensor.id!r} differs from its key")
            sensor.id = sensor_id
        owner: dict[str, str] = {}
        for sensor in self.sensors.values():
            for name in {normalize_name(n) for n in (sensor.id, sensor.label, sensor.label_zh, *sensor.synonyms) if n}:
                if owner.setdefault(name, sensor.id) != sensor.id:
                    raise ValueError(f"sensors {owner[name]!r} and {sensor.id!r} both answer to the name {name!r}")
        by_table: dict[str, list[tuple[int, int, str]]] = {}
        for sensor in self.sensors.values():
            by_table.setdefault(sensor.register_type, []).append(
                (sensor.address, sensor.address + sensor.width, sensor.id)
            )
        for table, spans in by_table.items():
            spans.sort()
            for (_, end_a, a), (start_b, _, b) in pairwise(spans):
                if start_b < end_a:
                    raise ValueError(f"sensors {a!r} and {b!r} overlap in {table} registers at address {start_b}")
        return self


def normalize_name(name: str) -> str:
    """How names are compared: case-insensitive, and `press 3`, `Press-3`, `press_3` are one name."""
    return re.sub(r"[\s_\-]+", " ", name.casefold()).strip()


def bind_device_ids(devices: dict[str, DeviceConfig]) -> dict[str, DeviceConfig]:
    for device_id, device in devices.items():
        if device.id and device.id != device_id:
            raise ValueError(f"device {device_id!r}: id {device.id!r} differs from its key")
        device.id = device_id
    return devices


def find_device(devices: dict[str, DeviceConfig], name: str) -> str | None:
    """The configured id for what a model or a technician wrote: the id, the name or a synonym,
    case-, space- and dash-insensitive ("Press 3", "press_3", "3号液压机" are all press-3)."""
    wanted = normalize_name(name)
    for device_id, device in devices.items():
        names = (device_id, device.name, device.name_zh, *device.synonyms)
        if wanted in {normalize_name(n) for n in names if n}:
            return device_id
    return None


_PUNCTUATION = re.compile(r"[^\w\s-]")


def devices_named(devices: Mapping[str, DeviceConfig], text: str) -> list[str]:
    """The configured devices a text names by id, name or synonym, whole words only, in the plant's order."""
    wanted = " " + normalize_name(_PUNCTUATION.sub(" ", text)) + " "
    named = []
    for device_id, device in devices.items():
        names = {normalize_name(n) for n in (device_id, device.name, device.name_zh, *device.synonyms) if n}
        if any(f" {n} " in wanted or (not n.isascii() and n in wanted) for n in names):
            named.append(device_id)
    return named


def unknown_device(devices: dict[str, DeviceConfig], name: str, source: str) -> ToolOutput:
    known = ", ".join(devices) or "(none configured)"
    return ToolOutput.error(
        "unknown_device",
        f"There is no device {name!r}. Known devices: {known}.",
        f"Use one of the known device ids exactly as listed: {known}.",
        source=source,
    )


class UnknownDevice(ValueError):
    """A device id the plant config does not have; the message lists the ones it has, for the operator."""

    def __init__(self, device_id: str, known: Iterable[str]):
        super().__init__(
            f"unknown device {device_id!r}; known devices: {', '.join(sorted(known)) or '(none configured)'}"
        )
        self.device_id = device_id


def require(devices: Mapping[str, DeviceConfig], device_id: str) -> DeviceConfig:
    """The device with exactly this id; raises `UnknownDevice` for any other."""
    device = devices.get(device_id)
    if device is None:
        raise UnknownDevice(device_id, devices)
    return device


def scope(device: DeviceConfig) -> Scope:
    """The manuals that apply to this device: its vendor and model."""
    return Scope(vendor=device.vendor, model=device.model, label=device.id)


def endpoints(devices: Mapping[str, DeviceConfig]) -> dict[tuple[str, int], dict[str, DeviceConfig]]:
    """The devices grouped by the Modbus TCP endpoint (host, port) that serves them, in config order."""
    grouped: dict[tuple[str, int], dict[str, DeviceConfig]] = {}
    for device_id, device in devices.items():
        grouped.setdefault((device.plc.host, device.plc.port), {})[device_id] = device
    return grouped


def repoint(
    devices: Mapping[str, DeviceConfig], host: str | None = None, port: int | None = None
) -> dict[str, DeviceConfig]:
    """Copies of the devices served at another host and/or port (a simulator); unit ids and sensors unchanged."""
    moved = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    return {
        device_id: device.model_copy(update={"plc": device.plc.model_copy(update=moved)}, deep=True)
        for device_id, device in devices.items()
    }
