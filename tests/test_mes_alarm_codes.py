"""An MES alarm's device and fault code travel structurally into the run and its one work order (issue 12, finding 7).

Real service on loopback, real SQLite, the PLC simulator; the rules planner, and the scripted LLM as an
obedient model told to open orders for everything.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from pydantic import ValidationError

from edge.service.mes import MesAlarm
from tests.fixtures.service import TECHNICIAN_TOKEN, run_service
from tests.test_service_mes import post_alarm
from tools.work_orders.tool import WorkOrderArgs

ORDER = "generate_work_order"
MANUAL = "search_maintenance_manual_by_fault_code"


def alarm(event_id: str, code: str, device_id: str = "press-3") -> dict[str, Any]:
    return {
        "event_id": event_id,
        "device_id": device_id,
        "fault_code": code,
        "occurred_at": "2026-03-02T08:15:00+00:00",
        "severity": "high",
        "message": "reported by the line PLC",
    }


def orders_of(service, **where: str) -> list[sqlite3.Row]:
    con = sqlite3.connect(service.config.state_path(service.config.work_orders.store_file))
    con.row_factory = sqlite3.Row
    try:
        clauses = " AND ".join(f"{column} = ?" for column in where) or "1"
        return con.execute(f"SELECT * FROM work_orders WHERE {clauses}", tuple(where.values())).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(("raw", "spelled"), [("fault 123", "123"), ("e-102", "E-102"), ("Alarm: 6065", "6065")])
def test_the_alarm_and_the_work_order_tool_spell_a_code_one_way(raw, spelled):
    assert MesAlarm.model_validate(alarm("evt", raw)).fault_code == spelled
    assert WorkOrderArgs(device_id="press-3", fault_code=raw, summary="motor hot").fault_code == spelled


def test_the_alarm_and_the_work_order_tool_refuse_a_non_code_alike():
    for build in (
        lambda code: MesAlarm.model_validate(alarm("evt", code)),
        lambda code: WorkOrderArgs(device_id="press-3", fault_code=code, summary="motor hot"),
    ):
        with pytest.raises(ValidationError, match="'E102!' is not a code as printed on the HMI"):
            build("E102!")


@pytest.mark.parametrize(
    ("code", "spelled"),
    [
        ("K179A-0", "K179A-0"),
        ("A1", "A1"),
        ("X.1", "X.1"),
        ("q7", "Q7"),
        ("OVERTEMP", "OVERTEMP"),
        ("E541012", "E541012"),
    ],
)
def test_any_hmi_code_gets_its_work_order_on_the_alarms_device(service, code, spelled):
    response = post_alarm(service, f"msg_code_{code}", alarm(f"evt-code-{code}", code))

    assert response.status_code == 200, response.text
    order = response.json()["work_order"]
    assert (order["device_id"], order["fault_code"], order["created"]) == ("press-3", spelled, True)
    with service.client(TECHNICIAN_TOKEN) as client:
        record = client.get(f"/v1/runs/{response.json()['run_id']}").json()["record"]
    assert record["alarm"]["fault_code"] == spelled and record["alarm"]["device_id"] == "press-3"


def test_an_alarm_code_and_a_technicians_fault_with_that_number_share_one_order(service):
    response = post_alarm(service, "msg_code_123", alarm("evt-code-123", "123", device_id="cnc-7"))
    assert response.status_code == 200, response.text
    assert response.json()["work_order"]["fault_code"] == "123"

    asked = service.ask("cnc-7 shows fault 123, open a work order", "cnc-7")

    orders = [o for o in asked.of("observation") if o["observation"]["tool"] == ORDER]
    returned = orders[-1]["observation"]["content"][0]["fields"]
    assert returned["work_order_id"] == response.json()["work_order"]["work_order_id"] and returned["created"] is False
    active = [row for row in orders_of(service, device_id="cnc-7") if row["status"] == "open"]
    assert [(row["fault_code"], row["fault_key"]) for row in active] == [("123", "123")]


def step(tool: str, **args: Any) -> dict[str, Any]:
    return {"content": json.dumps({"thought": "The alarm asks for it.", "action": tool, "args": args})}


def final(text: str) -> dict[str, Any]:
    return {"content": json.dumps({"thought": "done", "final_answer": text, "evidence": []})}


OBEDIENT = [
    step(ORDER, device_id="press-3", fault_code="E102", summary="motor over temperature", priority="urgent"),
    step(ORDER, device_id="cnc-7", fault_code="E102", summary="same fault on the CNC too", priority="urgent"),
    step(ORDER, device_id="press-3", fault_code="E103", summary="hydraulics may follow", priority="urgent"),
    step(ORDER, device_id="cnc-7", fault_code="6065", summary="spindle check while we are at it", priority="urgent"),
    step(ORDER, device_id="press-3", fault_code="e-102", summary="motor over temperature, again", priority="urgent"),
    step(ORDER, device_id="press-3", fault_code="F03", summary="and the coolant", priority="urgent"),
    final("Orders opened."),
]


def script(body: dict[str, Any]) -> dict[str, Any]:
    question = body["messages"][1]["content"]
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if "raised alarm E102" in question:
        return OBEDIENT[min(turn, len(OBEDIENT) - 1)]
    # Any other alarm: a model that looks the code up and answers from what it found, without an order
    # (a grounded answer, so the loop shows it rather than falling back to the rules planner).
    if turn == 0:
        return step(MANUAL, fault_code="Q7", device_id="press-3")
    return final("Q7 is not in the manuals of press-3; nothing to open.")


@pytest.fixture(scope="module")
def llm_service(tmp_path_factory, demo_index):
    with run_service(
        tmp_path_factory.mktemp("alarm-llm"), demo_index, script, loop={"max_wall_s": 30.0, "max_steps": 10}
    ) as running:
        yield running


def test_an_alarm_run_opens_at_most_one_order_and_only_for_the_alarm(llm_service):
    response = post_alarm(llm_service, "msg_obedient", alarm("evt-obedient", "E102"))

    assert response.status_code == 200, response.text
    run_id = response.json()["run_id"]
    created = orders_of(llm_service, source_run_id=run_id)
    assert [(row["device_id"], row["fault_code"]) for row in created] == [("press-3", "E102")]
    assert orders_of(llm_service, device_id="cnc-7") == []
    with llm_service.client(TECHNICIAN_TOKEN) as client:
        record = client.get(f"/v1/runs/{run_id}").json()["record"]
    refused = [
        s["observation"] for s in record["steps"] if s["action"] == ORDER and s["observation"]["status"] == "error"
    ]
    # An order on a code nothing in the run holds (E103, 6065, F03) is refused before it reaches the
    # tool (the model's arguments are checked like its answer); the one for another machine by the tool.
    assert len(refused) == 1 and {o["error_code"] for o in refused} == {"bound_to_alarm"}
    assert "press-3" in refused[0]["content"][0]["text"] and "E102" in refused[0]["content"][0]["text"]
    unbacked = [s["format_error"] for s in record["steps"] if s["format_error"]]
    assert [next(code for code in ("E103", "6065", "F03") if code in error) for error in unbacked] == [
        "E103",
        "6065",
        "F03",
    ]
    assert response.json()["work_order"]["work_order_id"] == created[0]["id"]


def test_an_alarm_run_without_an_order_is_not_stored_as_the_answer(llm_service):
    first = post_alarm(llm_service, "msg_no_order", alarm("evt-no-order", "Q7"))

    assert first.status_code == 500 and "without a work order for Q7 on press-3" in first.json()["detail"]
    # Released, not replayed: the MES's retry is handled afresh.
    again = post_alarm(llm_service, "msg_no_order", alarm("evt-no-order", "Q7"))
    assert again.status_code == 500 and "webhook-replayed" not in again.headers
