"""The plant simulator and its HTTP fault-injection endpoint, used over loopback."""

import httpx
import pytest

from tools.plc.sim_control import ControlServer
from tools.plc.simulator import nominal_value, start_simulator


def test_demo_plant_nominal_values_are_plausible(plant_devices):
    press = plant_devices["press-3"].sensors
    assert nominal_value(press["coolant_level"]) == pytest.approx(70)
    assert nominal_value(press["motor_temp"]) == pytest.approx(55.25)


def test_fault_injection_rejects_what_cannot_be_served(plc_sim):
    with pytest.raises(KeyError, match="serves no device 'press-9'"):
        plc_sim.silence("press-9")
    with pytest.raises(KeyError, match="has no sensor 'rpm'"):
        plc_sim.set_value("press-3", "rpm", 1)
    with pytest.raises(ValueError, match="does not fit sensor 'coolant_level'"):
        plc_sim.set_value("press-3", "coolant_level", -1)  # uint16 cannot hold a negative raw value
    with pytest.raises(ValueError):
        plc_sim.exception("press-3", "coolant_level", 99)


def test_units_sharing_a_port_need_distinct_unit_ids(plant_devices):
    clash = {k: d.model_copy(update={"plc": d.plc.model_copy(update={"unit_id": 1})}) for k, d in plant_devices.items()}
    with pytest.raises(ValueError, match="distinct unit ids"):
        start_simulator(clash, "127.0.0.1", 0)


def test_port_in_use_is_reported(plc_sim, plant_devices):
    with pytest.raises(OSError, match="could not listen"):
        start_simulator(plant_devices, "127.0.0.1", plc_sim.port)


def test_control_endpoint_applies_faults_the_tool_then_sees(plc_sim, plc_tool):
    from tools.contract import ToolContext
    from tools.plc.tool import PlcReadArgs

    control = ControlServer({"press-3": plc_sim, "cnc-7": plc_sim}, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{control.port}"
    try:
        ok = httpx.post(
            f"{base}/fault", json={"fault": "set_value", "device": "press-3", "sensor": "motor_temp", "value": 200}
        )
        assert ok.status_code == 200
        out = plc_tool.run(PlcReadArgs(device_id="press-3", sensor="motor_temp"), ToolContext("r", "r", 1))
        assert out.items[0].fields["is_outlier"] is True
        state = httpx.get(f"{base}/state").json()
        assert state["press-3"]["sensors"]["motor_temp"] == {
            "value": 200.0,
            "unit": "°C",
            "pinned": True,
            "drifting": False,
            "exception": None,
        }
        missing = httpx.post(f"{base}/fault", json={"fault": "drift", "device": "press-3", "sensor": "motor_temp"})
        assert missing.status_code == 400 and missing.json()["error"] == "fault 'drift' needs target, per_s"
        unknown = httpx.post(f"{base}/fault", json={"fault": "explode", "device": "press-3"})
        assert unknown.status_code == 400 and unknown.json()["error"].startswith("fault:")
        assert httpx.post(f"{base}/fault", json={"fault": "clear"}).status_code == 200
        assert httpx.get(f"{base}/state").json()["press-3"]["sensors"]["motor_temp"]["pinned"] is False
    finally:
        control.stop()


def test_ending_a_fault_over_the_control_endpoint_takes_no_parameters(plc_sim):
    control = ControlServer({"press-3": plc_sim, "cnc-7": plc_sim}, "127.0.0.1", 0)

    def post(**body) -> httpx.Response:
        return httpx.post(f"http://127.0.0.1:{control.port}/fault", json={"device": "press-3", **body})

    def pinned() -> dict[str, bool]:
        return {name: s["pinned"] for name, s in plc_sim.state()["press-3"]["sensors"].items() if s["pinned"]}

    try:
        for sensor in ("motor_temp", "oil_temp", "coolant_level"):
            assert post(fault="set_value", sensor=sensor, value=60).status_code == 200
        assert post(fault="set_value", sensor="motor_temp", on=False).status_code == 200
        assert pinned() == {"oil_temp": True, "coolant_level": True}
        assert post(fault="set_value", on=False).status_code == 200
        assert pinned() == {}
        ending_with_a_value = post(fault="set_value", sensor="motor_temp", value=200, on=False)
        assert ending_with_a_value.status_code == 400
        assert ending_with_a_value.json()["error"] == "ending fault 'set_value' takes no value"
        assert pinned() == {}
        assert post(fault="slow", seconds=1, on=False).json()["error"] == "ending fault 'slow' takes no seconds"
        on_a_sensor = post(fault="silence", sensor="motor_temp", on=False)
        assert on_a_sensor.json()["error"] == "ending fault 'silence' takes no sensor"
        assert post(fault="slow", seconds=1, code=4).json()["error"] == "fault 'slow' takes no code"
    finally:
        control.stop()


def test_the_handle_ends_one_kind_of_fault_and_names_what_it_cannot_end(plc_sim):
    plc_sim.exception("press-3", "motor_temp", 4)
    plc_sim.exception("press-3", "oil_temp", 6)
    plc_sim.slow("press-3", 1.0)
    plc_sim.end("press-3", "exception", "oil_temp")
    sensors = plc_sim.state()["press-3"]["sensors"]
    assert (sensors["motor_temp"]["exception"], sensors["oil_temp"]["exception"]) == (4, None)
    plc_sim.end("press-3", "slow")
    assert plc_sim.state()["press-3"]["delay_s"] == 0.0
    with pytest.raises(ValueError, match="fault 'silence' is on the whole device, not on sensor 'motor_temp'"):
        plc_sim.end("press-3", "silence", "motor_temp")
    with pytest.raises(ValueError, match="no fault 'explode'; the faults are silence, slow, malformed, exception"):
        plc_sim.end("press-3", "explode")
    with pytest.raises(KeyError, match="has no sensor 'rpm'"):
        plc_sim.end("press-3", "drift", "rpm")
