"""`POST /v1/mes/alarms` over real HTTP (uvicorn on loopback), signed by the `standardwebhooks` package."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from edge.config import load_config
from edge.service.mes import ALARMS_PATH, MesAlarm, build_mes_router
from tests.fixtures.work_orders import MES_SECRET, ROTATED_SECRET, row_count, serve_app, signed
from tools.contract import ToolContext
from tools.work_orders.config import WorkOrderConfig
from tools.work_orders.tool import WorkOrderArgs, WorkOrderTool

ALARM = {
    "event_id": "evt-1001",
    "device_id": "press-3",
    "fault_code": "E102",
    "occurred_at": "2025-03-01T08:00:00+00:00",
    "severity": "high",
    "message": "Main motor over temperature",
}


class AlarmHandler:
    """Stands where the lead's headless agent run goes: it calls the real work-order tool as the MES."""

    def __init__(self, store, devices):
        self.tool = WorkOrderTool(store, devices, WorkOrderConfig(require_confirmation=True))
        self.calls: list[MesAlarm] = []
        self.fail_next = 0
        self.gate: threading.Event | None = None

    def __call__(self, alarm: MesAlarm) -> dict:
        self.calls.append(alarm)
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("agent run crashed")
        run_id = f"run-{uuid.uuid4().hex[:8]}"
        ctx = ToolContext(request_id=run_id, run_id=run_id, loop_step=1, actor="mes", alarm=alarm.context_alarm())
        args = WorkOrderArgs(
            device_id=alarm.device_id,
            fault_code=alarm.fault_code,
            summary=alarm.message or f"MES alarm {alarm.fault_code}",
        )
        output = self.tool.run(args, ctx)
        return {"run_id": run_id, "work_order": output.items[0].fields}


@pytest.fixture
def mes_api(work_order_store):
    devices = load_config(env={}).devices
    handler = AlarmHandler(work_order_store, devices)
    app = FastAPI()
    app.include_router(build_mes_router([ROTATED_SECRET, MES_SECRET], handler, work_order_store, known_devices=devices))
    with serve_app(app) as base_url, httpx.Client(base_url=base_url, timeout=10) as client:
        yield client, handler, work_order_store


def _post(client, alarm=ALARM, **kw):
    body = json.dumps(alarm)
    headers = signed(body, **kw)
    return client.post(ALARMS_PATH, content=body, headers=headers), headers, body


def test_signed_alarm_creates_an_order_and_answers_with_it(mes_api):
    client, _handler, store = mes_api
    response, _, _ = _post(client)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["run_id"].startswith("run-")
    order = data["work_order"]
    # MES alarms are created automatically (no confirmation) with the priority from the severity.
    assert (order["created"], order["work_order_status"], order["priority"]) == (True, "open", "high")
    stored = store.get(order["work_order_id"])
    assert stored.created_by == "mes" and stored.alarm["event_id"] == "evt-1001"
    assert stored.occurrence == "alarm:evt-1001"


def test_replayed_webhook_id_gets_the_earlier_response(mes_api):
    client, handler, store = mes_api
    first, headers, body = _post(client)
    again = client.post(ALARMS_PATH, content=body, headers=headers)
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers["webhook-replayed"] == "true"
    assert len(handler.calls) == 1 and len(store.list()) == 1
    # The MES re-sending the same alarm as a new message gets the same order back, not a second one.
    resent, _, _ = _post(client)
    assert resent.json()["work_order"]["work_order_id"] == first.json()["work_order"]["work_order_id"]
    assert resent.json()["work_order"]["created"] is False and len(store.list()) == 1


@pytest.mark.parametrize("tamper", ["body", "signature", "wrong_secret", "stale", "future", "missing"])
def test_tampered_stale_and_unsigned_requests_are_refused(mes_api, tamper):
    client, handler, store = mes_api
    body = json.dumps(ALARM)
    now = datetime.now(UTC)
    headers = signed(body)
    if tamper == "body":
        body = body.replace("E102", "E103")
    elif tamper == "signature":
        headers["webhook-signature"] = signed(body + " ", msg_id=headers["webhook-id"])["webhook-signature"]
    elif tamper == "wrong_secret":
        headers = signed(body, secret="whsec_" + "b3RoZXItc2VjcmV0LW5vdC1vdXJzLTEyMzQ=")
    elif tamper == "stale":
        headers = signed(body, at=now - timedelta(minutes=5, seconds=30))
    elif tamper == "future":
        headers = signed(body, at=now + timedelta(minutes=6))
    else:
        headers = {"content-type": "application/json"}
    response = client.post(ALARMS_PATH, content=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["detail"].startswith("webhook verification failed")
    assert handler.calls == [] and row_count(store, "work_orders") == 0 and row_count(store, "inbound_webhooks") == 0


def test_a_rotated_secret_is_accepted(mes_api):
    client, _, _ = mes_api
    response, _, _ = _post(client, secret=ROTATED_SECRET)
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"occurred_at": None}, "occurred_at"),
        ({"occurred_at": "2025-03-01T08:00:00"}, "occurred_at"),  # no UTC offset: ambiguous on a plant with DST
        ({"severity": "apocalyptic"}, "severity"),
        ({"device_id": "press-9"}, "device_id"),
        ({"fault_code": "motor is hot!"}, "fault_code"),
        ({"event_id": ""}, "event_id"),
    ],
)
def test_malformed_alarm_is_422_naming_the_field_and_writes_nothing(mes_api, change, field):
    client, handler, store = mes_api
    alarm = {k: v for k, v in {**ALARM, **change}.items() if v is not None}
    response, _headers, _body = _post(client, alarm=alarm)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", field]
    if field == "device_id":
        assert "known devices: cnc-7, press-3" in response.json()["detail"][0]["msg"]
    assert handler.calls == [] and row_count(store, "work_orders") == 0 and row_count(store, "inbound_webhooks") == 0


def test_body_that_is_not_json_is_422(mes_api):
    client, handler, _ = mes_api
    body = "event_id=evt-1"
    response = client.post(ALARMS_PATH, content=body, headers=signed(body))
    assert response.status_code == 422 and response.json()["detail"][0]["type"] == "json_invalid"
    assert handler.calls == []


def test_failed_handling_leaves_nothing_and_the_retry_is_processed(mes_api):
    client, handler, store = mes_api
    handler.fail_next = 1
    failed, headers, body = _post(client)
    assert failed.status_code == 500 and "agent run crashed" in failed.json()["detail"]
    assert row_count(store, "inbound_webhooks") == 0 and row_count(store, "work_orders") == 0
    retried = client.post(ALARMS_PATH, content=body, headers=headers)
    assert retried.status_code == 200 and retried.json()["work_order"]["created"] is True


def test_concurrent_deliveries_of_one_message_run_the_agent_once(mes_api):
    client, handler, _store = mes_api
    handler.gate = threading.Event()
    body = json.dumps(ALARM)
    headers = signed(body)
    responses: list[httpx.Response] = []
    first = threading.Thread(target=lambda: responses.append(client.post(ALARMS_PATH, content=body, headers=headers)))
    first.start()
    while not handler.calls:
        threading.Event().wait(0.01)
    second = client.post(ALARMS_PATH, content=body, headers=headers)
    handler.gate.set()
    first.join(10)
    assert second.status_code == 409 and second.headers["retry-after"] == "1"
    assert responses[0].status_code == 200 and len(handler.calls) == 1
    replay = client.post(ALARMS_PATH, content=body, headers=headers)
    assert replay.json() == responses[0].json()
