"""The PLC subcommands, through `fixloop` as the shell runs it."""

import time

import pytest

from tools.plc.codec import decode
from tools.plc.errors import PlcReadError
from tools.plc.modbus import ModbusReader
from tools.plc.sim_control import ControlServer
from tools.plc.simulator import AMPLITUDE, nominal_value


def plant_on(port: int, tmp_path) -> dict[str, str]:
    return {
        "FIXLOOP_STATE_DIR": str(tmp_path),
        "FIXLOOP__DEVICES__PRESS-3__PLC__PORT": str(port),
        "FIXLOOP__DEVICES__CNC-7__PLC__PORT": str(port),
        "FIXLOOP__PLC__READ_BUDGET_MS": "200",
    }


def test_plc_read_poller_and_fault_commands(plc_sim, tmp_path, fixloop):
    fixloop.env(plant_on(plc_sim.port, tmp_path))
    code, out, _ = fixloop("plc", "poll", "--once")
    assert code == 0 and "refreshed 9/9" in out
    control = ControlServer({"press-3": plc_sim, "cnc-7": plc_sim}, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{control.port}"
        assert fixloop("plc", "fault", "silence", "press-3", "--control", url)[0] == 0
        code, _, err = fixloop("plc", "fault", "set_value", "press-3", "rpm", "--value", "1", "--control", url)
        assert code == 2 and "has no sensor 'rpm'" in err
    finally:
        control.stop()
    code, out, _ = fixloop("plc", "read", "press-3", "冷却液")
    assert code == 0 and "from the cache" in out and "UncertainNoCommunicationLastUsableValue" in out
    code, out, _ = fixloop("plc", "read", "press-9", "coolant")
    assert code == 1 and "Known devices: press-3, cnc-7" in out


def test_plc_fault_without_a_running_simulator_says_so(tmp_path, fixloop):
    fixloop.env(plant_on(1, tmp_path))
    code, _, err = fixloop("plc", "fault", "clear", "--control", "http://127.0.0.1:9")
    assert (
        code == 1
        and err.startswith("fixloop plc fault: cannot reach the simulator")
        and "is `fixloop plc sim` running?" in err
    )


def test_the_old_flat_plc_names_still_work_under_their_own_name(plc_sim, tmp_path, fixloop):
    fixloop.env(plant_on(plc_sim.port, tmp_path))
    code, out, _ = fixloop("poller", "--once")
    assert code == 0 and "refreshed 9/9" in out
    code, out, _ = fixloop("plc-read", "press-3", "coolant_level", "--json")
    assert code == 0 and '"status"' in out
    code, _, err = fixloop("plc-fault", "clear", "--control", "http://127.0.0.1:9")
    assert code == 1 and err.startswith("fixloop plc-fault: cannot reach the simulator")


# Each kind as `fixloop plc fault` injects it, and the reading it spoils (None: the read fails).
FAULTS = {
    "silence": ([], None),
    "slow": (["--seconds", "1"], None),
    "exception": (["motor_temp", "--code", "6"], None),
    "set_value": (["motor_temp", "--value", "200"], 200.0),
    "drift": (["motor_temp", "--target", "95", "--per-s", "1000000"], 95.0),
    "malformed": ([], None),
}


@pytest.mark.parametrize("kind", FAULTS)
def test_plc_fault_off_ends_every_kind_without_its_parameters(kind, plc_sim, plant_devices, tmp_path, fixloop):
    device = plant_devices["press-3"]
    sensor = device.sensors["motor_temp"]
    reader = ModbusReader()

    def read() -> float:
        return decode(sensor, reader.read_registers(device.plc, sensor, budget_s=0.3))

    control = ControlServer({"press-3": plc_sim, "cnc-7": plc_sim}, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{control.port}"
        arguments, spoilt = FAULTS[kind]
        assert fixloop("plc", "fault", kind, "press-3", *arguments, "--control", url)[0] == 0
        if spoilt is None:
            with pytest.raises(PlcReadError):
                read()
        else:
            assert read() == pytest.approx(spoilt)
        code, out, err = fixloop("plc", "fault", kind, "press-3", "--off", "--control", url)
        assert (code, err) == (0, "") and '"on": false' in out
        started = time.monotonic()
        # Back on the simulator's healthy sine wave around the nominal value, and answered within the budget.
        assert read() == pytest.approx(
            nominal_value(sensor), abs=(sensor.alarm_high - sensor.plausible_min) * AMPLITUDE + 0.1
        )
        assert time.monotonic() - started < 0.3
    finally:
        control.stop()
        reader.close()
