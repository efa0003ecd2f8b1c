"""MES alarms through the service: a signed alarm becomes a headless run that opens one work order."""

from __future__ import annotations

import json

from tests.fixtures.service import TECHNICIAN_TOKEN
from tests.fixtures.work_orders import signed


def post_alarm(service, webhook_id: str, alarm: dict, secret: str | None = None):
    body = json.dumps(alarm)
    with service.client(None) as client:
        return client.post(
            "/v1/mes/alarms",
            content=body,
            headers=signed(body, webhook_id, secret=secret or service.config.mes.secrets[0]),
        )


ALARM = {
    "event_id": "mes-evt-4711",
    "device_id": "press-3",
    "fault_code": "e102",
    "occurred_at": "2026-03-02T08:15:00+00:00",
    "severity": "critical",
    "message": "motor overtemperature",
}


def test_a_signed_alarm_runs_the_agent_and_opens_one_work_order(service):
    response = post_alarm(service, "msg_alarm_1", ALARM)

    assert response.status_code == 200, response.text
    result = response.json()
    order = result["work_order"]
    assert order["work_order_status"] == "open" and order["created"] is True
    assert order["device_id"] == "press-3" and order["fault_code"] == "E102" and order["priority"] == "urgent"
    assert result["termination"] == "final_answer"

    with service.client(TECHNICIAN_TOKEN) as client:
        record = client.get(f"/v1/runs/{result['run_id']}").json()["record"]
        orders = client.get("/v1/work-orders", params={"device_id": "press-3"}).json()
    assert record["actor"] == "mes" and record["device_id"] == "press-3"
    actions = [s["action"] for s in record["steps"] if s["action"]]
    assert actions[0] == "search_maintenance_manual_by_fault_code"
    assert "read_plc_sensor_value" in actions and actions[-1] == "generate_work_order"
    assert [o["id"] for o in orders] == [order["work_order_id"]]
    assert orders[0]["created_by"] == "mes" and orders[0]["alarm"]["event_id"] == "mes-evt-4711"

    # The MES retries after a lost response: same webhook-id, same answer, no second run.
    replay = post_alarm(service, "msg_alarm_1", ALARM)
    assert replay.status_code == 200 and replay.headers["webhook-replayed"] == "true"
    assert replay.json()["run_id"] == result["run_id"]


def test_an_alarm_with_a_wrong_signature_runs_nothing(service):
    with service.client(TECHNICIAN_TOKEN) as client:
        before = len(client.get("/v1/runs", params={"limit": 200}).json())
    wrong = "whsec_" + "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC0wMDAwMDA="
    response = post_alarm(service, "msg_alarm_2", {**ALARM, "event_id": "mes-evt-4712"}, secret=wrong)
    assert response.status_code == 401
    with service.client(TECHNICIAN_TOKEN) as client:
        assert len(client.get("/v1/runs", params={"limit": 200}).json()) == before


def post_status(service, webhook_id: str, change: dict):
    body = json.dumps(change)
    with service.client(None) as client:
        return client.post(
            "/v1/mes/work-order-status",
            content=body,
            headers=signed(body, webhook_id, secret=service.config.mes.secrets[0]),
        )


def test_the_mes_closes_an_order_with_its_fix_and_the_next_alarm_answers_with_it(service):
    first = post_alarm(service, "msg_fix_alarm_1", {**ALARM, "event_id": "mes-evt-5001", "fault_code": "F03"})
    order_id = first.json()["work_order"]["work_order_id"]
    for n, status in enumerate(("acknowledged", "in_progress")):
        assert (
            post_status(service, f"msg_fix_step_{n}", {"work_order_id": order_id, "status": status}).status_code == 200
        )
    closed = post_status(
        service,
        "msg_fix_close",
        {
            "work_order_id": order_id,
            "status": "done",
            "cause": "coolant filter clogged",
            "remedy": "replaced the filter",
            "parts": [{"part": "FLT-200", "quantity": 1}],
        },
    )
    assert closed.status_code == 200, closed.text
    assert closed.json()["work_order"]["closed_by"] == "mes"

    again = post_alarm(service, "msg_fix_alarm_2", {**ALARM, "event_id": "mes-evt-5002", "fault_code": "F03"})
    assert again.status_code == 200, again.text
    result = again.json()
    assert result["work_order"]["created"] is True and result["work_order"]["work_order_id"] != order_id
    date = closed.json()["work_order"]["closed_at"][:10]
    assert (
        f"Last fix on this machine: {order_id}, {date} — cause: coolant filter clogged; "
        "remedy: replaced the filter; parts: FLT-200 ×1"
    ) in result["answer"]
