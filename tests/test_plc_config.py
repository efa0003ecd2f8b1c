"""Wrong sensor maps fail at start-up with a message naming the entry."""

import pytest

from edge.config import ConfigError, load_config

BASE = """
[devices.press-3]
plc = { host = "127.0.0.1", port = 15020, unit_id = 1 }
[devices.press-3.sensors.motor_temp]
address = 0
data_type = "int16"
plausible_min = -20
plausible_max = 150
"""


def load(tmp_path, extra: str):
    path = tmp_path / "plant.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path, env={})


def test_the_base_map_loads(tmp_path):
    assert list(load(tmp_path, "").devices["press-3"].sensors) == ["motor_temp"]


@pytest.mark.parametrize(
    "extra,expected",
    [
        (
            "[devices.press-3.sensors.oil]\naddress = 0\nplausible_min = 0\nplausible_max = 1\n",
            "sensors 'motor_temp' and 'oil' overlap in holding registers at address 0",
        ),
        (
            '[devices.press-3.sensors.pressure]\naddress = 1\ndata_type = "float64"\nplausible_min = 0\nplausible_max = 1\n',
            "devices.press-3.sensors.pressure.data_type: Input should be 'int16', 'uint16', 'int32', 'uint32' or 'float32'",
        ),
        (
            "[devices.press-3.sensors.level]\naddress = 5\nplausible_min = 0\nplausible_max = 100\nalarm_low = -5\n",
            "alarm_low (-5.0) lies outside the plausible range",
        ),
        (
            '[devices.press-3.sensors.level]\naddress = 65535\ndata_type = "int32"\nplausible_min = 0\nplausible_max = 1\n',
            "int32 at address 65535 runs past the last register",
        ),
        (
            "[devices.press-3.sensors.level]\naddress = 5\nplausible_min = 10\nplausible_max = 1\n",
            "plausible_min (10.0) must be below plausible_max",
        ),
        (
            '[devices.press-3.sensors.oil]\naddress = 3\nplausible_min = 0\nplausible_max = 1\nsynonyms = ["Motor Temp"]\n',
            "sensors 'motor_temp' and 'oil' both answer to the name 'motor temp'",
        ),
        (
            '[devices.press-3.sensors.oil]\naddress = 3\nplausible_min = 0\nplausible_max = 1\nword_order = "middle"\n',
            "devices.press-3.sensors.oil.word_order",
        ),
    ],
)
def test_wrong_sensor_map_names_the_entry(tmp_path, extra, expected):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, extra)
    assert expected in str(err.value)
    assert "press-3" in str(err.value)
