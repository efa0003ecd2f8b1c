"""Lock-out (issue 21): the plant's isolation steps in the manual tool's observation, the isolation confirmation
on the move to in_progress (tablet route, signed MES webhook, CLI) against the PLC simulator's DC-bus voltage,
`[work_orders] require_isolation`, and the checklist ticks kept on the order."""

from __future__ import annotations

import json
import re
import sqlite3

import httpx
import pytest
from pydantic import ValidationError

from edge.config import load_config
from edge.service.mes import STATUS_PATH
from tests.fixtures.service import run_service
from tests.fixtures.work_orders import signed
from tools.contract import ToolContext
from tools.manual_search.tool import ManualSearchTool
from tools.plant import DeviceConfig
from tools.work_orders.store import ISOLATION_VERSION, WorkOrderStore

SIGNAL = "dc_bus_voltage"


@pytest.fixture(scope="module")
def plant(tmp_path_factory, demo_index):
    with run_service(tmp_path_factory.mktemp("isolation"), demo_index) as running:
        yield running


@pytest.fixture
def sim(plant):
    yield plant.sim
    plant.sim.clear()


def _order(running, device_id: str = "press-3", fault: str = "E102", status: str = "acknowledged"):
    order, _ = running.service.work_orders.create_or_get(
        device_id=device_id,
        fault_code=fault,
        title="Motor over-temperature",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-iso",
    )
    if status != "open":
        running.service.work_orders.set_status(order.id, "acknowledged", "technician")
    return order


def _close(running, order_id: str) -> None:
    running.service.work_orders.set_status(order_id, "cancelled", "technician")


def _start(client: httpx.Client, order_id: str, **body) -> httpx.Response:
    return client.post(f"/v1/work-orders/{order_id}/status", json={"status": "in_progress", **body})


# -- the plant config ---------------------------------------------------------------------------------


def test_the_demo_plant_maps_its_lockout_and_a_wrong_signal_is_named():
    press = load_config(env={}).devices["press-3"]
    assert press.isolation is not None and press.isolation.zero_energy is not None
    assert (press.isolation.zero_energy.sensor, press.isolation.zero_energy.below) == (SIGNAL, 30)
    assert all(step.text and step.text_zh for step in press.isolation.steps)
    sensor = {"address": 0, "plausible_min": 0, "plausible_max": 900}
    with pytest.raises(
        ValidationError, match=re.escape("zero_energy.sensor 'dc_bus' is not one of the device's sensors: v")
    ):
        DeviceConfig.model_validate(
            {
                "sensors": {"v": sensor},
                "isolation": {
                    "energy_sources": ["electrical"],
                    "steps": [{"text": "off"}],
                    "zero_energy": {"sensor": "dc_bus", "below": 30},
                },
            }
        )
    with pytest.raises(ValidationError, match="exactly one of below"):
        DeviceConfig.model_validate(
            {
                "sensors": {"v": sensor},
                "isolation": {
                    "energy_sources": ["electrical"],
                    "steps": [{"text": "off"}],
                    "zero_energy": {"sensor": "v", "below": 30, "equals": 0},
                },
            }
        )
    with pytest.raises(ValidationError, match="energy_sources"):
        DeviceConfig.model_validate({"isolation": {"energy_sources": ["electric"], "steps": [{"text": "off"}]}})


# -- the manual tool's observation ------------------------------------------------------------------


def _search(plant, **args):
    ctx = ToolContext(request_id="req-iso", run_id="run-iso", loop_step=1)
    return plant.service.agent.registry.call(ManualSearchTool.name, args, ctx, "obs-1")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_hands_on_remedy_lists_the_isolation_steps_after_the_safety_statements_before_the_steps(plant, language):
    obs = _search(plant, fault_code="E102", device_id="press-3", language=language)
    kinds = [("isolation" if "isolation_step" in i.fields else i.kind) for i in obs.content]
    assert kinds.index("safety") < kinds.index("isolation") < kinds.index("step")
    assert kinds.count("isolation") == 5
    steps = plant.config.devices["press-3"].isolation.steps
    first = next(i for i in obs.content if "isolation_step" in i.fields)
    assert first.text == (steps[0].text_zh if language == "zh" else steps[0].text)
    assert first.fields == {
        "isolation_step": 1,
        "device_id": "press-3",
        "energy_sources": ["electrical", "hydraulic", "gravity"],
        "source": "plant config",
    }


def test_no_device_means_no_isolation_steps(plant):
    obs = _search(plant, fault_code="E102")
    assert obs.status == "ok" and not any("isolation_step" in i.fields for i in obs.content)


def test_the_rules_answer_gives_the_lockout_before_the_manual_steps(plant):
    answer = next(
        e for e in plant.ask("Press-3 shows E102, what should I do?", "press-3").events if e["type"] == "final_answer"
    )
    text = answer["text"]
    assert text.index("First isolate press-3") < text.index("Switch the main switch Q1 off") < text.index("Steps:")


# -- the confirmation on the tablet's route ---------------------------------------------------------


def test_an_energised_dc_bus_refuses_the_confirmation_with_the_reading_and_writes_nothing(plant, sim):
    order = _order(plant)
    sim.set_value("press-3", SIGNAL, 560)
    outbox_before = len(plant.service.work_orders.outbox(("pending", "failed", "delivered"), limit=1000))
    with plant.client() as client:
        response = _start(client, order.id, isolation_confirmed=True, by="J. Weber")
    assert response.status_code == 409, response.text
    detail = response.json()["detail"]
    assert "still energised" in detail and "560 V" in detail and "quality Good" in detail and "below 30 V" in detail
    stored = plant.service.work_orders.get(order.id)
    assert stored.status == "acknowledged" and stored.isolation_confirmed_by is None
    assert len(plant.service.work_orders.outbox(("pending", "failed", "delivered"), limit=1000)) == outbox_before
    _close(plant, order.id)


def test_a_discharged_dc_bus_accepts_it_and_records_who_when_and_the_reading_in_the_outbox(plant, sim):
    order = _order(plant)
    sim.set_value("press-3", SIGNAL, 12)
    with plant.client() as client:
        response = _start(client, order.id, isolation_confirmed=True, by="J. Weber")
        assert response.status_code == 200, response.text
        record = client.get(f"/v1/work-orders/{order.id}").json()
    assert record["status"] == "in_progress" and record["isolation_confirmed_by"] == "J. Weber"
    assert record["isolation_confirmed_at"] == record["updated_at"]
    reading = record["isolation_reading"]
    assert (reading["sensor"], reading["value"], reading["unit"], reading["quality"]) == (SIGNAL, 12, "V", "Good")
    rows = [r for r in plant.service.work_orders.outbox() if r.work_order_id == order.id]
    event = json.loads(rows[-1].body)
    assert event["type"] == "work_order.status_changed"
    assert event["data"]["isolation_confirmed_by"] == "J. Weber" and event["data"]["isolation_reading"]["value"] == 12
    _close(plant, order.id)


def test_a_silent_plc_refuses_the_confirmation_naming_no_communication(tmp_path, demo_index):
    # Its own service: the silence opens the PLC breaker, which would refuse the other tests' reads too.
    with run_service(tmp_path, demo_index, plc={"read_budget_ms": 200}) as running:
        order = _order(running)
        running.sim.silence("press-3")
        with running.client() as client:
            response = _start(client, order.id, isolation_confirmed=True, by="J. Weber")
        assert response.status_code == 409, response.text
        assert "no communication with its PLC" in response.json()["detail"]
        assert running.service.work_orders.get(order.id).status == "acknowledged"


def test_a_device_without_a_signal_records_the_confirmation_alone(plant, sim):
    order = _order(plant, device_id="cnc-7", fault="E201")
    with plant.client() as client:
        assert _start(client, order.id, isolation_confirmed=True, by="A. Li").status_code == 200
    stored = plant.service.work_orders.get(order.id)
    assert (stored.isolation_confirmed_by, stored.isolation_reading) == ("A. Li", None)
    _close(plant, order.id)


def test_bad_confirmations_are_422_naming_the_field(plant):
    order = _order(plant)
    with plant.client() as client:
        no_name = _start(client, order.id, isolation_confirmed=True)
        on_done = client.post(
            f"/v1/work-orders/{order.id}/status", json={"status": "done", "isolation_confirmed": True, "by": "x"}
        )
    assert no_name.status_code == 422 and "needs by" in json.dumps(no_name.json())
    assert on_done.status_code == 422 and "goes with the move to in_progress" in json.dumps(on_done.json())
    assert plant.service.work_orders.get(order.id).status == "acknowledged"
    _close(plant, order.id)


@pytest.mark.parametrize("required", [True, False])
def test_require_isolation(tmp_path, demo_index, required):
    with run_service(tmp_path, demo_index, work_orders={"require_isolation": required}) as running:
        order = _order(running)
        with running.client() as client:
            response = _start(client, order.id)
        if required:
            assert response.status_code == 422 and "this plant requires isolation" in response.json()["detail"]
            assert running.service.work_orders.get(order.id).status == "acknowledged"
        else:
            assert response.status_code == 200 and response.json()["isolation_confirmed_by"] is None


# -- the MES webhook and the CLI ---------------------------------------------------------------------


def test_the_mes_confirmation_reads_the_same_signal(plant, sim):
    order = _order(plant)
    secret = plant.config.mes.secrets[0]

    def post(msg_id: str) -> httpx.Response:
        body = json.dumps(
            {"work_order_id": order.id, "status": "in_progress", "isolation_confirmed": True, "by": "MES: K. Braun"}
        )
        return httpx.post(
            plant.url + STATUS_PATH, content=body, headers=signed(body, msg_id, secret=secret), timeout=10
        )

    sim.set_value("press-3", SIGNAL, 400)
    refused = post("msg_iso_high")
    assert refused.status_code == 409 and "400 V" in refused.json()["detail"]
    sim.set_value("press-3", SIGNAL, 5)
    accepted = post("msg_iso_low")
    assert accepted.status_code == 200, accepted.text
    stored = plant.service.work_orders.get(order.id)
    assert (stored.status, stored.isolation_confirmed_by, stored.isolation_reading.value) == (
        "in_progress",
        "MES: K. Braun",
        5,
    )
    _close(plant, order.id)


def test_the_cli_confirmation_reads_the_same_signal(plant, sim, fixloop):
    order = _order(plant)
    fixloop.env(
        {
            "FIXLOOP_STATE_DIR": str(plant.config.state_path(".")),
            "FIXLOOP__DEVICES__PRESS-3__PLC__PORT": str(sim.port),
            "FIXLOOP__DEVICES__CNC-7__PLC__PORT": str(sim.port),
        }
    )
    sim.set_value("press-3", SIGNAL, 610)
    code, _, err = fixloop("work-orders", "set-status", order.id, "in_progress", "--isolation-confirmed", "--by", "Ops")
    assert code != 0 and "still energised" in err and "610 V" in err
    code, _, err = fixloop("work-orders", "set-status", order.id, "in_progress", "--isolation-confirmed")
    assert code != 0 and "--isolation-confirmed: isolation_confirmed needs by" in err
    sim.set_value("press-3", SIGNAL, 3)
    code, out, _ = fixloop("work-orders", "set-status", order.id, "in_progress", "--isolation-confirmed", "--by", "Ops")
    assert code == 0 and "isolation confirmed by Ops: Drive DC bus voltage 3 V (Good)" in out
    _close(plant, order.id)


# -- the checklist --------------------------------------------------------------------------------------


def _tick(client, order_id, tick_id, step_key="step:1", done=True, **extra):
    body = {"client_tick_id": tick_id, "step_key": step_key, "text": "Stop the press", "done": done, "by": "J. Weber"}
    return client.post(f"/v1/work-orders/{order_id}/checklist", json={**body, **extra})


def test_ticks_are_kept_in_order_once_each_with_the_named_sensor_read(plant, sim):
    order = _order(plant)
    sim.set_value("press-3", "motor_temp", 58.5)
    with plant.client() as client:
        first = _tick(client, order.id, "tick-0001-aaaa")
        again = _tick(client, order.id, "tick-0001-aaaa")
        sensor = _tick(
            client, order.id, "tick-0002-bbbb", "step:4", sensor="motor_temp", ticked_at="2030-01-02T03:04:05+00:00"
        )
        untick = _tick(client, order.id, "tick-0003-cccc", done=False)
        reused = _tick(client, order.id, "tick-0001-aaaa", done=False)
        wrong_sensor = _tick(client, order.id, "tick-0004-dddd", sensor="spindle_speed")
        record = client.get(f"/v1/work-orders/{order.id}").json()
    assert first.status_code == 200 and first.json()["applied"] is True
    assert again.status_code == 200 and again.json()["applied"] is False
    assert sensor.status_code == 200 and untick.status_code == 200
    assert reused.status_code == 409 and "needs a new client_tick_id" in reused.json()["detail"]
    assert wrong_sensor.status_code == 422 and "not a sensor of press-3" in wrong_sensor.json()["detail"]
    ticks = record["checklist"]
    assert [(t["step_key"], t["done"]) for t in ticks] == [("step:1", True), ("step:4", True), ("step:1", False)]
    assert all(t["by"] == "J. Weber" and t["at"] for t in ticks)
    assert ticks[1]["ticked_at"] == "2030-01-02T03:04:05+00:00"
    assert (ticks[1]["reading"]["value"], ticks[1]["reading"]["unit"], ticks[1]["reading"]["quality"]) == (
        58.5,
        "°C",
        "Good",
    )

    # The MES sees the sequence with the next status change.
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")
    event = json.loads([r for r in plant.service.work_orders.outbox() if r.work_order_id == order.id][-1].body)
    assert [t["client_tick_id"] for t in event["data"]["checklist"]] == [
        "tick-0001-aaaa",
        "tick-0002-bbbb",
        "tick-0003-cccc",
    ]
    with plant.client() as client:
        closed = _tick(client, order.id, "tick-0005-eeee")
    assert closed.status_code == 409 and "its checklist is closed" in closed.json()["detail"]


def test_the_live_reading_route_reads_through_the_plc_tool(plant, sim):
    sim.set_value("press-3", "motor_temp", 61.2)
    with plant.client() as client:
        read = client.get("/v1/devices/press-3/sensors/motor_temp/reading").json()
        missing = client.get("/v1/devices/press-3/sensors/rpm/reading")
    assert (read["reading"]["value"], read["reading"]["source"], read["status"]) == (61.2, "live", "ok")
    assert missing.status_code == 404 and "has no sensor 'rpm'" in missing.json()["detail"]


def test_an_old_store_file_gets_the_isolation_columns_once(tmp_path):
    path = tmp_path / "old.sqlite"
    WorkOrderStore(path)
    con = sqlite3.connect(path)
    con.executescript(
        "ALTER TABLE work_orders DROP COLUMN isolation_confirmed_at; ALTER TABLE work_orders DROP COLUMN isolation_confirmed_by;"
        "ALTER TABLE work_orders DROP COLUMN isolation_reading; PRAGMA user_version = 2;"
    )
    con.close()
    WorkOrderStore(path)
    store = WorkOrderStore(path)
    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code="E102",
        title="t",
        summary="s",
        priority="low",
        created_by="technician",
        run_id="r",
    )
    con = sqlite3.connect(path)
    columns = [row[1] for row in con.execute("PRAGMA table_info(work_orders)")]
    assert con.execute("PRAGMA user_version").fetchone()[0] >= ISOLATION_VERSION  # later migrations follow it
    con.close()
    assert columns.count("isolation_confirmed_by") == 1
    assert store.get(order.id).isolation_confirmed_by is None
