"""Our reader and decoder against pyModbusTCP's server: a Modbus implementation that is not pymodbus."""

import socket
import struct

import pytest
from pyModbusTCP.server import DataBank, ModbusServer

from tools.plant import DeviceConfig
from tools.plc.config import PlcConfig
from tools.plc.gateway import PlcGateway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def regs(fmt: str, raw, little: bool = False) -> list[int]:
    packed = struct.pack(">" + fmt, raw)
    words = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, len(packed), 2)]
    return words[::-1] if little else words


@pytest.fixture
def foreign_plc():
    bank = DataBank()
    bank.set_holding_registers(0, regs("h", -215))  # -21.5 °C, int16 scale 0.1
    bank.set_holding_registers(1, regs("H", 61234))  # 6123.4, uint16 scale 0.1
    bank.set_holding_registers(2, regs("i", -123456))  # int32 big
    bank.set_holding_registers(4, regs("i", 7654321, little=True))  # int32 little
    bank.set_holding_registers(6, regs("f", 231.25))  # float32 big
    bank.set_holding_registers(8, regs("f", 2.5, little=True))  # float32 little, offset -1
    bank.set_input_registers(0, regs("H", 500))  # input register, scale 0.01 offset 20
    server = ModbusServer("127.0.0.1", free_port(), no_block=True, data_bank=bank)
    server.start()
    yield server
    server.stop()


def test_decoding_against_pymodbustcp_server(foreign_plc, tmp_path):
    device = DeviceConfig.model_validate(
        {
            "id": "foreign",
            "plc": {"host": "127.0.0.1", "port": foreign_plc.port, "unit_id": 1},
            "sensors": {
                "t16": {"address": 0, "data_type": "int16", "scale": 0.1, "plausible_min": -50, "plausible_max": 50},
                "u16": {"address": 1, "data_type": "uint16", "scale": 0.1, "plausible_min": 0, "plausible_max": 7000},
                "i32b": {"address": 2, "data_type": "int32", "plausible_min": -1e6, "plausible_max": 1e6},
                "i32l": {
                    "address": 4,
                    "data_type": "int32",
                    "word_order": "little",
                    "plausible_min": 0,
                    "plausible_max": 1e7,
                },
                "f32b": {"address": 6, "data_type": "float32", "plausible_min": 0, "plausible_max": 400},
                "f32l": {
                    "address": 8,
                    "data_type": "float32",
                    "word_order": "little",
                    "offset": -1,
                    "plausible_min": 0,
                    "plausible_max": 10,
                },
                "in16": {
                    "register_type": "input",
                    "address": 0,
                    "data_type": "uint16",
                    "scale": 0.01,
                    "offset": 20,
                    "plausible_min": 0,
                    "plausible_max": 100,
                },
            },
        }
    )
    gateway = PlcGateway({"foreign": device}, PlcConfig(), tmp_path / "cache.sqlite")
    try:
        values = {s: gateway.read("foreign", s) for s in device.sensors}
    finally:
        gateway.close()
    assert {s: r.quality for s, r in values.items()} == {s: "Good" for s in device.sensors}
    assert values["t16"].value == pytest.approx(-21.5)
    assert values["u16"].value == pytest.approx(6123.4)
    assert values["i32b"].value == -123456
    assert values["i32l"].value == 7654321
    assert values["f32b"].value == 231.25
    assert values["f32l"].value == 1.5
    assert values["in16"].value == pytest.approx(25.0)
