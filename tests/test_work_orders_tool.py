"""`generate_work_order` through the real tool registry, as the loop calls it."""

from __future__ import annotations

import re

import pytest

from edge.config import load_config
from tools.contract import ToolContext
from tools.registry import ToolRegistry
from tools.work_orders.config import WorkOrderConfig
from tools.work_orders.tool import WorkOrderTool

ARGS = {"device_id": "press-3", "fault_code": "E102", "summary": "motor overheating, motor_temp 92 °C"}


@pytest.fixture
def devices():
    return load_config(env={}).devices


def _registry(store, devices, require_confirmation=False):
    tool = WorkOrderTool(store, devices, WorkOrderConfig(require_confirmation=require_confirmation))
    return ToolRegistry([tool])


def _ctx(**kw) -> ToolContext:
    return ToolContext(**{"request_id": "req-1", "run_id": "run-1", "loop_step": 1, **kw})


def _ref(observation) -> dict:
    (item,) = observation.content
    assert item.kind == "ref"
    return item.fields


def test_create_then_repeat_returns_the_existing_order(work_order_store, devices):
    registry = _registry(work_order_store, devices)
    first = registry.call("generate_work_order", ARGS, _ctx(actor="operator"), "obs-1")
    again = registry.call("generate_work_order", {**ARGS, "fault_code": "e102"}, _ctx(actor="agent"), "obs-2")
    assert first.status == again.status == "ok"
    assert _ref(first)["created"] is True and _ref(again)["created"] is False
    assert _ref(first)["work_order_id"] == _ref(again)["work_order_id"]
    assert "created" in first.content[0].text and "Existing order returned" in again.content[0].text
    fields = _ref(first)
    assert fields["title"] == "Hydraulic press 3 E102: motor overheating, motor_temp 92 °C"
    assert (fields["priority"], fields["work_order_status"], fields["device_id"]) == ("medium", "open", "press-3")
    assert first.dropped_fields == []
    assert len(work_order_store.list()) == 1
    # To the second, as stored without the fraction a model once read as "open for 549 seconds".
    stored = work_order_store.list()[0].created_at
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", fields["created_at"]), fields["created_at"]
    assert stored.startswith(fields["created_at"][:-1])


def test_evidence_and_actor_are_stored_as_the_trace(work_order_store, devices):
    evidence = (
        {"kind": "manual", "doc": "HP-200.pdf", "page": 14, "fault_code": "E102"},
        {"kind": "sensor", "sensor": "motor_temp", "value": 92.1, "unit": "°C"},
    )
    obs = _registry(work_order_store, devices).call(
        "generate_work_order", ARGS, _ctx(actor="agent", run_id="run-77", evidence=evidence), "o"
    )
    order = work_order_store.get(_ref(obs)["work_order_id"])
    assert (order.created_by, order.source_run_id, order.evidence) == ("agent", "run-77", list(evidence))


def test_unknown_device_lists_the_known_ones(work_order_store, devices):
    obs = _registry(work_order_store, devices).call(
        "generate_work_order", {**ARGS, "device_id": "press-9"}, _ctx(), "o"
    )
    assert (obs.status, obs.error_code) == ("error", "unknown_device")
    assert "press-9" in obs.content[0].text and "press-3, cnc-7" in obs.content[0].text
    assert work_order_store.list() == []


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({**ARGS, "fault_code": "overheating!!"}, "fault_code"),
        ({**ARGS, "priority": "asap"}, "priority"),
        ({k: v for k, v in ARGS.items() if k != "summary"}, "summary"),
        ({**ARGS, "summary": "      "}, "summary"),  # spaces only: stripped before the length check
        ({**ARGS, "colour": "red"}, "colour"),
    ],
)
def test_bad_arguments_name_the_field(work_order_store, devices, args, field):
    obs = _registry(work_order_store, devices).call("generate_work_order", args, _ctx(), "o")
    assert (obs.status, obs.error_code) == ("error", "invalid_arguments")
    assert repr(field) in obs.content[0].text
    assert work_order_store.list() == []


def test_tablet_flow_waits_for_confirmation(work_order_store, devices):
    registry = _registry(work_order_store, devices, require_confirmation=True)
    parked = registry.call("generate_work_order", {**ARGS, "priority": "high"}, _ctx(actor="technician"), "o1")
    fields = _ref(parked)
    assert parked.status == "ok" and fields["work_order_status"] == "pending_confirmation"
    assert (fields["priority"], fields["fault_code"], fields["created"]) == ("high", "E102", False)
    assert "work_order_id" not in fields and work_order_store.list() == []
    confirmed = registry.call(
        "generate_work_order", {**ARGS, "priority": "high"}, _ctx(actor="technician", confirmed=True), "o2"
    )
    assert _ref(confirmed)["created"] is True and _ref(confirmed)["work_order_status"] == "open"
    # Once an order is open, the same report returns it without asking again.
    repeat = registry.call("generate_work_order", ARGS, _ctx(actor="technician"), "o3")
    assert _ref(repeat)["work_order_id"] == _ref(confirmed)["work_order_id"] and _ref(repeat)["created"] is False


def test_mes_alarms_need_no_confirmation_and_set_priority_from_severity(work_order_store, devices):
    registry = _registry(work_order_store, devices, require_confirmation=True)
    alarm = {"event_id": "evt-5", "occurred_at": "2025-03-01T08:00:00Z", "severity": "critical"}
    obs = registry.call("generate_work_order", ARGS, _ctx(actor="mes", alarm=alarm), "o")
    assert _ref(obs)["created"] is True and _ref(obs)["priority"] == "urgent"
    # An explicit request for confirmation is honoured whoever asks.
    parked = registry.call(
        "generate_work_order", {**ARGS, "fault_code": "F03"}, _ctx(actor="mes", require_confirmation=True), "o2"
    )
    assert _ref(parked)["work_order_status"] == "pending_confirmation"


def test_schema_carries_format_hints():
    schema = WorkOrderTool.input_schema()
    assert "e.g. E102, F03, 6065, ALARM:1" in schema["properties"]["fault_code"]["description"]
    assert set(schema["required"]) == {"device_id", "fault_code", "summary"}
    assert WorkOrderTool.side_effect is True and WorkOrderTool.name == "generate_work_order"
