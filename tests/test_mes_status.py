"""`POST /v1/mes/work-order-status` over real HTTP (uvicorn on loopback), signed by the `standardwebhooks` package:
the MES moves an order along and, closing it, records what was found and done."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI

from edge.service.mes import STATUS_PATH, MesAlarm, build_mes_router
from tests.fixtures.work_orders import MES_SECRET, row_count, serve_app, signed, take_to

WRONG_SECRET = "whsec_" + "b3RoZXItc2VjcmV0LW5vdC1vdXJzLTEyMzQ="
FIX = {
    "cause": "coolant filter clogged",
    "remedy": "replaced the filter",
    "note": "two months overdue",
    "parts": [{"part": "FLT-200", "quantity": 1}, {"part": "O-ring"}],
}


def _no_alarms(alarm: MesAlarm) -> dict:
    raise AssertionError(f"no alarm is sent in these tests, got {alarm}")


@pytest.fixture
def mes_api(work_order_store):
    app = FastAPI()
    app.include_router(build_mes_router([MES_SECRET], _no_alarms, work_order_store))
    with serve_app(app) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client, work_order_store


def _in_progress(store, fault: str = "E102"):
    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code=fault,
        title="t",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-1",
    )
    return take_to(store, order, "in_progress")


def _post(client, change: dict | str, msg_id: str | None = None, secret: str = MES_SECRET):
    body = change if isinstance(change, str) else json.dumps(change)
    return client.post(STATUS_PATH, content=body, headers=signed(body, msg_id, secret=secret))


def test_a_signed_close_records_the_fix_once_and_a_replay_gets_the_same_answer(mes_api):
    client, store = mes_api
    order = _in_progress(store)
    change = {"work_order_id": order.id, "status": "done", **FIX, "mes_user": "j.smith"}  # vendor fields are ignored
    response = _post(client, change, msg_id="msg_close_1")

    assert response.status_code == 200, response.text
    closed = store.get(order.id)
    assert response.json() == {"work_order": closed.model_dump(mode="json")}
    assert (closed.status, closed.closed_by, closed.cause, closed.remedy, closed.note) == (
        "done",
        "mes",
        "coolant filter clogged",
        "replaced the filter",
        "two months overdue",
    )
    assert [part.label() for part in closed.parts] == ["FLT-200 ×1", "O-ring"]
    rows = [r for r in store.outbox() if r.work_order_id == order.id]
    assert json.loads(rows[-1].body)["data"]["cause"] == "coolant filter clogged"

    # The MES retries after a lost response: same webhook-id, same answer, nothing applied twice.
    replay = _post(client, change, msg_id="msg_close_1")
    assert replay.status_code == 200 and replay.headers["webhook-replayed"] == "true"
    assert replay.json() == response.json() and store.get(order.id) == closed
    assert len([r for r in store.outbox() if r.work_order_id == order.id]) == len(rows)


def test_moves_that_close_nothing_are_applied_without_a_fix(mes_api):
    client, store = mes_api
    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code="E102",
        title="t",
        summary="s",
        priority="high",
        created_by="mes",
        run_id="run-1",
    )
    response = _post(client, {"work_order_id": order.id, "status": "acknowledged", "cause": "", "parts": []})
    assert response.status_code == 200 and response.json()["work_order"]["closed_at"] is None
    assert store.get(order.id).status == "acknowledged"


@pytest.mark.parametrize("secret", [WRONG_SECRET, None])
def test_a_change_with_a_wrong_or_no_signature_changes_nothing(mes_api, secret):
    client, store = mes_api
    order = _in_progress(store)
    body = json.dumps({"work_order_id": order.id, "status": "done", **FIX})
    if secret:
        response = _post(client, body, secret=secret)
    else:
        response = client.post(STATUS_PATH, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 401 and response.json()["detail"].startswith("webhook verification failed")
    assert store.get(order.id) == order and row_count(store, "inbound_webhooks") == 0


@pytest.mark.parametrize(
    ("change", "loc", "message"),
    [
        ({"status": "closed"}, ["body", "status"], "Input should be"),
        ({"status": None}, ["body", "status"], "Field required"),
        ({"work_order_id": None}, ["body", "work_order_id"], "Field required"),
        ({"parts": [{"part": "FLT-200", "quantity": -1}]}, ["body", "parts", 0, "quantity"], "positive number"),
        ({"parts": [{"quantity": 2}]}, ["body", "parts", 0, "part"], "Field required"),
        ({"cause": "x" * 2001}, ["body", "cause"], "at most 2000 characters"),
        ({"status": "in_progress"}, ["body"], "recorded when an order is closed (done or cancelled)"),
    ],
)
def test_a_malformed_change_is_422_naming_the_field_and_changes_nothing(mes_api, change, loc, message):
    client, store = mes_api
    order = _in_progress(store)
    body = {k: v for k, v in {"work_order_id": order.id, "status": "done", **FIX, **change}.items() if v is not None}
    response = _post(client, body)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == loc and message in error["msg"]
    assert store.get(order.id) == order and row_count(store, "inbound_webhooks") == 0


def test_a_body_that_is_not_json_is_422(mes_api):
    client, _ = mes_api
    response = _post(client, "status=done")
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"


def test_an_unknown_order_is_404_and_a_refused_move_409_and_the_retry_is_handled_afresh(mes_api):
    client, store = mes_api
    missing = _post(client, {"work_order_id": "WO-0000000000000000", "status": "done"})
    assert missing.status_code == 404 and "no work order 'WO-0000000000000000'" in missing.json()["detail"]

    order, _ = store.create_or_get(
        device_id="press-3",
        fault_code="E102",
        title="t",
        summary="s",
        priority="high",
        created_by="mes",
        run_id="run-1",
    )
    change = {"work_order_id": order.id, "status": "done", **FIX}
    refused = _post(client, change, msg_id="msg_early_close")
    assert refused.status_code == 409
    assert "is open; it cannot move to done (allowed: acknowledged, cancelled)" in refused.json()["detail"]
    assert store.get(order.id) == order and row_count(store, "inbound_webhooks") == 0

    # Once the order is where the MES expected, the same message is applied, not answered from a record.
    for status in ("acknowledged", "in_progress"):
        store.set_status(order.id, status, actor="technician")
    retried = _post(client, change, msg_id="msg_early_close")
    assert retried.status_code == 200 and "webhook-replayed" not in retried.headers
    assert store.get(order.id).cause == "coolant filter clogged"
