"""Register decoding against the sensor map: every type, both word orders, scale and offset."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.plant import SensorConfig
from tools.plc.codec import decode, encode
from tools.plc.errors import MalformedReply

FORMATS = {"int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "float32": "f"}


def sensor(data_type: str, word_order: str = "big", scale: float = 1.0, offset: float = 0.0) -> SensorConfig:
    return SensorConfig(
        id="s",
        address=10,
        data_type=data_type,
        word_order=word_order,
        scale=scale,
        offset=offset,
        plausible_min=-1e12,
        plausible_max=1e12,
    )


def words(fmt: str, raw, word_order: str) -> list[int]:
    """Registers built by struct, independently of pymodbus."""
    packed = struct.pack(">" + fmt, raw)
    regs = [int.from_bytes(packed[i : i + 2], "big") for i in range(0, len(packed), 2)]
    return regs[::-1] if word_order == "little" else regs


@pytest.mark.parametrize(
    "data_type,raw",
    [("int16", -1234), ("uint16", 65000), ("int32", -70000), ("uint32", 4_000_000_000), ("float32", 12.5)],
)
@pytest.mark.parametrize("word_order", ["big", "little"])
def test_decode_matches_struct_packing(data_type, raw, word_order):
    s = sensor(data_type, word_order, scale=0.5, offset=-3)
    assert decode(s, words(FORMATS[data_type], raw, word_order)) == pytest.approx(raw * 0.5 - 3)


def test_word_order_matters_for_32_bit_values():
    big, little = sensor("int32", "big"), sensor("int32", "little")
    regs = words("i", 100_000, "big")
    assert decode(big, regs) == 100_000
    assert decode(little, regs) != 100_000


@given(
    data_type=st.sampled_from(["int16", "uint16", "int32", "uint32"]),
    word_order=st.sampled_from(["big", "little"]),
    raw=st.integers(min_value=0, max_value=30000),
    scale=st.sampled_from([1.0, 0.1, 0.01, 2.0]),
    offset=st.sampled_from([0.0, -40.0, 273.15]),
)
def test_encode_then_decode_round_trips(data_type, word_order, raw, scale, offset):
    s = sensor(data_type, word_order, scale, offset)
    value = raw * scale + offset
    assert decode(s, encode(s, value)) == pytest.approx(value, abs=scale / 2)


def test_wrong_register_count_is_a_malformed_reply():
    with pytest.raises(MalformedReply, match="expected 2 register"):
        decode(sensor("float32"), [1])


def test_nan_float_is_a_malformed_reply():
    with pytest.raises(MalformedReply, match="nan"):
        decode(sensor("float32"), [0x7FC0, 0])


def test_encode_names_the_sensor_when_a_value_does_not_fit():
    with pytest.raises(ValueError, match=r"sensor 's'.*outside -32768..32767"):
        encode(sensor("int16", scale=0.1), 5000)
