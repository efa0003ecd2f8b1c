"""Bad input through the real service (issue 35, item 7): blank text and names are 422s naming the field on
the tablet's routes and the MES's webhooks, an invisible or bidi-override name is refused as an identity,
control characters never reach the store, and the isolation rule is the store's, not one config's."""

from __future__ import annotations

import json

import httpx
import pytest

from edge.service.mes import STATUS_PATH
from tests.fixtures.service import run_service
from tests.fixtures.work_orders import signed

# Names that show nothing, or show something other than what they are.
ZERO_WIDTH = "\u200b\u200b"
INVISIBLE_NAMES = [ZERO_WIDTH, "\u2060\ufeff", "\u3164", " \u00a0\u200d "]
BIDI_NAMES = ["\u202eJ. Weber", "J.\u2066 Weber\u2069", "Li\u202bWei\u202c"]
ESCAPES = "\x1b[2J\x1b]0;owned\x07\x08\x7f"


@pytest.fixture(scope="module")
def plant(tmp_path_factory, demo_index):
    with run_service(tmp_path_factory.mktemp("bad-input"), demo_index) as running:
        yield running


def _order(running, fault: str = "E102", device_id: str = "cnc-7"):
    order, _ = running.service.work_orders.create_or_get(
        device_id=device_id,
        fault_code=fault,
        title="Spindle over-temperature",
        summary="spindle hot",
        priority="high",
        created_by="technician",
        run_id="run-bad-input",
    )
    running.service.work_orders.set_status(order.id, "acknowledged", "technician")
    return order


def _tick(client: httpx.Client, order_id: str, tick_id: str, **fields) -> httpx.Response:
    body = {"client_tick_id": tick_id, "step_key": "step:1", "text": "Stop the spindle", "done": True, "by": "A. Li"}
    return client.post(f"/v1/work-orders/{order_id}/checklist", json={**body, **fields})


def _refused_field(response: httpx.Response) -> list[str]:
    assert response.status_code == 422, response.text
    return [error["loc"][-1] for error in response.json()["detail"]]


# -- blank text ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["   ", "\t\n ", ZERO_WIDTH, "\x1b\x07"])
def test_a_tick_whose_text_shows_nothing_is_a_422_naming_text_and_writes_nothing(plant, text):
    # A 500 here kept the tablet's write queue retrying it forever, every queued write stuck behind it.
    order = _order(plant, "E201")
    with plant.client() as client:
        response = _tick(client, order.id, "tick-blank-0001", text=text)
    assert _refused_field(response) == ["text"]
    assert "blank" in json.dumps(response.json())
    assert plant.service.work_orders.get(order.id).checklist == []
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")


def test_a_question_that_shows_nothing_is_a_422_naming_question(plant):
    with plant.client() as client:
        response = client.post("/v1/runs", json={"question": ZERO_WIDTH + " "})
    assert _refused_field(response) == ["question"]


# -- names as identities ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", INVISIBLE_NAMES + BIDI_NAMES + ["   ", "A.\x1b[8m Li"])
def test_a_name_that_shows_nothing_or_reorders_itself_is_refused_as_who_ticked(plant, name):
    order = _order(plant, "E201")
    with plant.client() as client:
        response = _tick(client, order.id, "tick-name-0001", by=name)
    assert _refused_field(response) == ["by"]
    assert plant.service.work_orders.get(order.id).checklist == []
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")


@pytest.mark.parametrize("name", [ZERO_WIDTH, "\u202eJ. Weber"])
def test_a_name_that_shows_nothing_or_reorders_itself_is_refused_as_who_isolated(plant, name):
    order = _order(plant, "E201")
    with plant.client() as client:
        response = client.post(
            f"/v1/work-orders/{order.id}/status",
            json={"status": "in_progress", "isolation_confirmed": True, "by": name},
        )
    assert _refused_field(response) == ["by"]
    message = json.dumps(response.json())
    assert ("visible character" in message) if name == ZERO_WIDTH else ("bidirectional control" in message)
    stored = plant.service.work_orders.get(order.id)
    assert (stored.status, stored.isolation_confirmed_by) == ("acknowledged", None)
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")


def test_the_mes_is_refused_the_same_names_and_blank_ids(plant):
    order = _order(plant, "E201")
    secret = plant.config.mes.secrets[0]

    def post(path: str, body: dict, msg_id: str) -> httpx.Response:
        text = json.dumps(body)
        return httpx.post(plant.url + path, content=text, headers=signed(text, msg_id, secret=secret), timeout=30)

    move = {"work_order_id": order.id, "status": "in_progress", "isolation_confirmed": True}
    assert _refused_field(post(STATUS_PATH, {**move, "by": "MES: \u2067K. Braun"}, "msg_bad_by_1")) == ["by"]
    assert _refused_field(post(STATUS_PATH, {**move, "by": "\u200b"}, "msg_bad_by_2")) == ["by"]
    assert _refused_field(post(STATUS_PATH, {**move, "work_order_id": "  ", "by": "K"}, "msg_bad_id")) == [
        "work_order_id"
    ]
    alarm = {"event_id": "   ", "device_id": "cnc-7", "fault_code": "E201", "occurred_at": "2026-03-02T08:15:00Z"}
    assert _refused_field(post("/v1/mes/alarms", alarm, "msg_bad_event")) == ["event_id"]
    assert plant.service.work_orders.get(order.id).status == "acknowledged"
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")


def test_a_name_keeps_what_it_shows_and_loses_what_it_hides(plant):
    order = _order(plant, "E201")
    with plant.client() as client:
        response = _tick(client, order.id, "tick-name-0002", by="  A.\u200b  Li ")
    assert response.status_code == 200, response.text
    assert plant.service.work_orders.get(order.id).checklist[0].by == "A. Li"
    plant.service.work_orders.set_status(order.id, "cancelled", "technician")


# -- control characters in stored text ------------------------------------------------------------------------


def test_control_characters_are_stripped_before_anything_is_stored(plant):
    order = _order(plant, "E201")
    with plant.client() as client:
        ticked = _tick(client, order.id, "tick-ctrl-0001", text=f"Stop{ESCAPES} the spindle\r\nthen wait")
        assert ticked.status_code == 200, ticked.text
        for status in ("in_progress", "done"):
            body = {"status": status}
            if status == "done":
                body.update(cause=f"fan{ESCAPES} seized", remedy="new fan\x9b31m", parts=[{"part": "FAN-40\x00"}])
            assert client.post(f"/v1/work-orders/{order.id}/status", json=body).status_code == 200
    stored = plant.service.work_orders.get(order.id)
    assert stored.checklist[0].text == "Stop[2J]0;owned the spindle\nthen wait"
    assert (stored.cause, stored.remedy, stored.parts[0].part) == ("fan[2J]0;owned seized", "new fan31m", "FAN-40")


# -- the isolation rule lives with the orders -------------------------------------------------------------


def test_a_rule_recorded_by_one_process_binds_a_service_whose_config_says_nothing(tmp_path, demo_index):
    with run_service(tmp_path, demo_index, work_orders={"require_isolation": True}):
        pass
    # The same plant data, served with the demo config's `require_isolation = false`.
    with run_service(tmp_path, demo_index) as running:
        order = _order(running, "E201")
        with running.client() as client:
            refused = client.post(f"/v1/work-orders/{order.id}/status", json={"status": "in_progress"})
            assert refused.status_code == 422, refused.text
            assert "this plant requires isolation" in refused.json()["detail"]
            assert "isolation-rule off" in refused.json()["detail"]
            assert running.service.work_orders.get(order.id).status == "acknowledged"
            body = json.dumps({"work_order_id": order.id, "status": "in_progress"})
            secret = running.config.mes.secrets[0]
            from_mes = client.post(STATUS_PATH, content=body, headers=signed(body, "msg_no_isolation", secret=secret))
            assert from_mes.status_code == 422 and "this plant requires isolation" in from_mes.json()["detail"]
            assert running.service.work_orders.get(order.id).status == "acknowledged"
            confirmed = client.post(
                f"/v1/work-orders/{order.id}/status",
                json={"status": "in_progress", "isolation_confirmed": True, "by": "A. Li"},
            )
        assert confirmed.status_code == 200, confirmed.text
