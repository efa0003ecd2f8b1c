"""The plant model: one unknown-device error and message wherever a device id comes in, the manual scope
of a device, its Modbus endpoints, and the plant re-pointed at a simulator (real Modbus TCP)."""

from __future__ import annotations

import json

import pytest

from edge.config import load_config
from edge.evaluation.cases import CaseFileError, load_cases
from tools import plant
from tools.contract import ToolContext
from tools.plant import UnknownDevice
from tools.plc.simulator import start_simulator
from tools.plc.tool import PlcReadArgs, PlcReadTool

MESSAGE = "unknown device 'press-9'; known devices: cnc-7, press-3"


@pytest.fixture
def devices():
    return load_config(env={}).devices


def test_require_returns_the_device_and_refuses_any_other_id_naming_the_known_ones(devices):
    assert plant.require(devices, "cnc-7") is devices["cnc-7"]
    with pytest.raises(UnknownDevice) as raised:
        plant.require(devices, "press-9")
    assert str(raised.value) == MESSAGE and raised.value.device_id == "press-9"
    # An id, exactly: names and synonyms are resolved by the tools, for what a model or technician wrote.
    with pytest.raises(UnknownDevice):
        plant.require(devices, "Press 3")
    with pytest.raises(UnknownDevice, match=r"known devices: \(none configured\)"):
        plant.require({}, "press-3")


def test_the_agent_the_search_command_and_a_case_file_word_an_unknown_device_alike(
    make_agent, devices, fixloop, tmp_path, demo_index
):
    with pytest.raises(UnknownDevice) as raised:
        make_agent().ask("Press-9 shows E102", device_id="press-9")
    assert str(raised.value) == MESSAGE

    fixloop.env({"FIXLOOP_STATE_DIR": str(tmp_path)})
    code, _, err = fixloop("search", "E102", "--device", "press-9", "--db", str(demo_index))
    assert code == 2 and MESSAGE in " ".join(err.split())

    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "question": "E102?", "device_id": "press-9"}) + "\n", encoding="utf-8")
    with pytest.raises(CaseFileError) as refused:
        load_cases(cases, devices)
    assert str(refused.value).endswith(f"(a): {MESSAGE}")


def test_a_devices_scope_is_its_vendor_and_model(devices):
    scope = plant.scope(devices["press-3"])
    assert (scope.vendor, scope.model, scope.label) == (devices["press-3"].vendor, devices["press-3"].model, "press-3")
    assert scope.vendor and scope.model


def test_devices_sharing_a_plc_gateway_are_one_endpoint_until_one_is_moved(devices):
    ((endpoint, shared),) = plant.endpoints(devices).items()
    assert list(shared) == ["press-3", "cnc-7"] and endpoint == (
        devices["press-3"].plc.host,
        devices["press-3"].plc.port,
    )

    moved = {**devices, "cnc-7": plant.repoint({"cnc-7": devices["cnc-7"]}, port=endpoint[1] + 7)["cnc-7"]}
    assert plant.endpoints(moved) == {
        endpoint: {"press-3": moved["press-3"]},
        (endpoint[0], endpoint[1] + 7): {"cnc-7": moved["cnc-7"]},
    }


def test_a_repointed_plant_is_read_from_the_simulator_and_the_config_is_left_alone(devices, tmp_path):
    configured = {device_id: device.plc.model_copy() for device_id, device in devices.items()}
    sim = start_simulator(devices, "127.0.0.1", 0)
    try:
        served = plant.repoint(devices, sim.host, sim.port)
        assert {(d.plc.host, d.plc.port) for d in served.values()} == {("127.0.0.1", sim.port)}
        assert [d.plc.unit_id for d in served.values()] == [c.unit_id for c in configured.values()]
        assert {device_id: device.plc for device_id, device in devices.items()} == configured
        tool = PlcReadTool(served, load_config(env={}).plc, tmp_path / "plc_cache.sqlite")
        try:
            output = tool.run(
                PlcReadArgs(device_id="press-3", sensor="coolant_level"),
                ToolContext(request_id="t", run_id="t", loop_step=1, actor="operator"),
            )
        finally:
            tool.close()
    finally:
        sim.stop()
    (ref,) = [item for item in output.items if item.kind == "ref"]
    assert output.status == "ok" and (ref.fields["source"], ref.fields["quality"]) == ("live", "Good")
