"""Register words <-> engineering values, per the sensor map.

Decoding goes through pymodbus' `convert_from_registers` so that byte and
word order follow the library every Modbus peer of ours is tested against;
scale and offset are applied here: value = raw * scale + offset.
"""

from __future__ import annotations

import math

from pymodbus.client import ModbusTcpClient

from tools.plant import SensorConfig
from tools.plc.errors import MalformedReply

_DATATYPE = {
    "int16": ModbusTcpClient.DATATYPE.INT16,
    "uint16": ModbusTcpClient.DATATYPE.UINT16,
    "int32": ModbusTcpClient.DATATYPE.INT32,
    "uint32": ModbusTcpClient.DATATYPE.UINT32,
    "float32": ModbusTcpClient.DATATYPE.FLOAT32,
}
_INT_RANGE = {
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
}


def decode(sensor: SensorConfig, registers: list[int]) -> float:
    if len(registers) != sensor.width:
        raise MalformedReply(
            f"expected {sensor.width} register(s) for {sensor.data_type} at {sensor.register_type} "
            f"{sensor.address}, got {len(registers)}"
        )
    raw = ModbusTcpClient.convert_from_registers(registers, _DATATYPE[sensor.data_type], word_order=sensor.word_order)
    value = float(raw) * sensor.scale + sensor.offset  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise MalformedReply(f"{sensor.data_type} at {sensor.register_type} {sensor.address} decodes to {value}")
    return value


def encode(sensor: SensorConfig, value: float) -> list[int]:
    """Registers a PLC would hold for `value`; the simulator's side of `decode`."""
    raw: float = (value - sensor.offset) / sensor.scale
    if sensor.data_type in _INT_RANGE:
        low, high = _INT_RANGE[sensor.data_type]
        raw = round(raw)
        if not low <= raw <= high:
            raise ValueError(
                f"{value} {sensor.unit} does not fit sensor {sensor.id!r} ({sensor.data_type}, scale {sensor.scale:g}, "
                f"offset {sensor.offset:g}): raw {raw} is outside {low}..{high}"
            )
    return ModbusTcpClient.convert_to_registers(raw, _DATATYPE[sensor.data_type], word_order=sensor.word_order)
