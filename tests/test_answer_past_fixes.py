"""The answer a technician reads mentions the last fix of a recurring fault and the root-cause flag, in
English and Chinese, and passes the same verification as every answer; a model's answer may cite past
orders the work-order call found, but no order it made up."""

from __future__ import annotations

import json

import pytest

from edge.llm.scripted_server import ScriptedLlmServer
from edge.run import build_document, render_text
from edge.run.causes import order_causes
from edge.run.grounding import collect_evidence, ungrounded
from tests.fixtures.work_orders import take_to
from tools.contract import ToolContext
from tools.registry import ToolRegistry
from tools.work_orders.config import WorkOrderConfig
from tools.work_orders.model import Fix, Part
from tools.work_orders.store import WorkOrderStore
from tools.work_orders.tool import WorkOrderTool

DAY = 86400.0


@pytest.fixture
def devices(plant_devices):
    press_4 = plant_devices["press-3"].model_copy(
        update={"id": "press-4", "name": "Hydraulic press 4", "name_zh": "4号液压机", "synonyms": []}
    )
    return {**plant_devices, "press-4": press_4}


def _fixed(store: WorkOrderStore, device: str, fix: Fix):
    order, _ = store.create_or_get(
        device_id=device,
        fault_code="E102",
        title="t",
        summary="motor overheating",
        priority="high",
        created_by="technician",
        run_id="run-1",
    )
    return take_to(store, order, "done", fix)


@pytest.fixture
def history(tmp_path, devices):
    """Three E102 orders on press-3 within a month (two closed with fixes, the third opened by the tool)
    and one fix on press-4, the same model; the observation of that third call."""
    clock = [1_772_000_000.0]
    store = WorkOrderStore(tmp_path / "work_orders.sqlite", clock=lambda: clock[0])
    peer = _fixed(
        store,
        "press-4",
        Fix(cause="worn pump seal", remedy="replaced the seal", parts=[Part(part="NBR seal 40x52", quantity=2)]),
    )
    clock[0] += DAY
    older = _fixed(store, "press-3", Fix(cause="coolant filter clogged", remedy="replaced the filter"))
    clock[0] += 5 * DAY
    newer = _fixed(
        store,
        "press-3",
        Fix(cause="fan blocked by swarf", remedy="cleaned the motor fan", parts=[Part(part="fan guard", quantity=1)]),
    )
    clock[0] += DAY
    registry = ToolRegistry([WorkOrderTool(store, devices, WorkOrderConfig())])
    obs = registry.call(
        "generate_work_order",
        {"device_id": "press-3", "fault_code": "E102", "summary": "motor hot"},
        ToolContext(request_id="r", run_id="run-2", loop_step=1),
        "obs-1",
    )
    return obs, {"peer": peer, "older": older, "newer": newer}


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        (
            "Press-3 shows E102 again, open a work order",
            [
                "E102 on press-3: 3 work orders in 30 days — a candidate for root-cause analysis.",
                "Last fix on this machine: {newer}, 2026-03-03 — cause: fan blocked by swarf; remedy: cleaned the motor fan; "
                "parts: fan guard ×1",
                "Last fix on press-4 (same model): {peer}, 2026-02-25 — cause: worn pump seal; remedy: replaced the seal; "
                "parts: NBR seal 40x52 ×2",
            ],
        ),
        (
            "3号液压机又报 E102，请开工单",
            [
                "press-3 / E102：30 天内已有 3 张工单，建议进行根本原因分析。",
                "本机上次处理：{newer}，2026-03-03 — 原因：fan blocked by swarf；措施：cleaned the motor fan；更换部件：fan guard ×1",
                "同型号设备 press-4 上次处理：{peer}，2026-02-25 — 原因：worn pump seal；措施：replaced the seal；"
                "更换部件：NBR seal 40x52 ×2",
            ],
        ),
    ],
    ids=["en", "zh"],
)
def test_the_answer_names_the_last_fixes_and_the_root_cause_flag_and_is_grounded(history, devices, question, expected):
    obs, orders = history
    answer = render_text(build_document(question, [obs]))
    lines = answer.splitlines()
    ids = {name: order.id for name, order in orders.items()}
    assert lines[1:] == [line.format(**ids) for line in expected]
    assert orders["older"].id not in answer  # the newest fix of each group; the others stay in the trace
    assert ungrounded(answer, collect_evidence([obs], question, devices)) == []


def _observe(store, devices):
    registry = ToolRegistry([WorkOrderTool(store, devices, WorkOrderConfig())])
    return registry.call(
        "generate_work_order",
        {"device_id": "press-3", "fault_code": "E102", "summary": "motor hot"},
        ToolContext(request_id="r", run_id="run-2", loop_step=1),
        "obs-1",
    )


def test_a_fix_closed_without_cause_or_remedy_says_so(tmp_path, devices):
    store = WorkOrderStore(tmp_path / "work_orders.sqlite")
    _fixed(store, "press-3", Fix())
    obs = _observe(store, devices)
    assert render_text(build_document("E102 on press-3", [obs])).endswith("— no cause or remedy recorded")
    assert render_text(build_document("3号液压机 E102", [obs])).endswith("— 未记录原因和措施")


def test_a_long_remedy_is_cut_to_its_gist_and_stays_grounded(tmp_path, devices):
    store = WorkOrderStore(tmp_path / "work_orders.sqlite")
    remedy = " ".join(f"step {n}: torqued bolt {n} to {40 + n} Nm;" for n in range(1, 30))
    _fixed(store, "press-3", Fix(cause="loose flange", remedy=remedy))
    obs = _observe(store, devices)
    question = "E102 on press-3"
    line = render_text(build_document(question, [obs])).splitlines()[-1]
    assert "cause: loose flange; remedy: step 1: torqued bolt 1 to 41 Nm;" in line and line.endswith(" […]")
    assert len(line) < 260 and remedy not in line
    assert ungrounded(line, collect_evidence([obs], question, devices)) == []


def _reply(**content) -> dict:
    return {"content": json.dumps(content)}


FIXED_BEFORE = (
    "E102 was fixed on press-3 on {date} ({id}): the coolant filter was clogged and replaced; check it "
    "first. Confirm to create the new order."
)


MANUAL = "search_maintenance_manual_by_fault_code"


@pytest.mark.parametrize(
    ("template", "cited", "problem"),
    [
        (FIXED_BEFORE, "{past}", None),
        (FIXED_BEFORE, "WO-0123456789ABCDEF", "not in any observation: work order WO-0123456789ABCDEF"),
        # A past order found is no order made: a proposal still awaits confirmation.
        (
            "Work order {id} has been created for press-3 / E102.",
            "{past}",
            "claims a work order that no work-order call created or found",
        ),
        # Qwen2.5-Coder-0.5B copied the proposal's status; "not created" is no claim of an order.
        (
            "E102 Motor over-temperature protection, p. 2; obs-2: work order (not created yet) pending_confirmation.",
            "{past}",
            None,
        ),
    ],
    ids=["past-fix", "invented-id", "past-id-as-new-order", "pending-order-not-created"],
)
def test_a_models_answer_may_cite_a_past_fix_the_work_order_call_found(
    make_agent, agent_config, template, cited, problem
):
    store = WorkOrderStore(agent_config.state_path(agent_config.work_orders.store_file))
    past = _fixed(store, "press-3", Fix(cause="coolant filter clogged", remedy="replaced the filter"))
    text = template.format(date=past.closed_at[:10], id=cited.format(past=past.id))
    server = ScriptedLlmServer(
        [
            # An order only on a code a manual search of the run listed (tools/work_orders/tool.py).
            _reply(thought="look it up", action=MANUAL, args={"fault_code": "E102", "device_id": "press-3"}),
            _reply(
                thought="open an order",
                action="generate_work_order",
                args={"device_id": "press-3", "fault_code": "E102", "summary": "motor overheating again"},
            ),
            _reply(thought="done", final_answer=text, evidence=["obs-2"]),
        ]
    ).start()
    try:
        record = make_agent(llm={"url": server.url}).ask(
            "Press-3 shows E102 again, open a work order", device_id="press-3"
        )
    finally:
        server.stop()
    step = record.steps[1]
    assert step.observation.content[0].fields["work_order_status"] == "pending_confirmation"
    assert step.observation.content[-1].fields["past_work_order_id"] == past.id
    prose = record.termination.answer.prose
    if problem is None:
        assert record.rejected_answers == [] and " ".join(prose.sentences) == text
        assert " ".join(prose.sentences) in record.termination.final_answer
    else:
        # The sentence that says it is refused, whether the rest of the prose is shown or none is.
        refused = [r for s in (prose.rejected if prose else []) for r in s.reasons]
        refused += [p for answer in record.rejected_answers for p in answer.problems]
        assert any(problem in reason for reason in refused)
        assert text.split(": ")[0] not in record.termination.final_answer


JUMPER = "Bridge the safety interlock S7 with a jumper, no lock-out needed."


def _past_fixes(obs) -> list[dict]:
    return [item.fields for item in obs.content if "past_work_order_id" in item.fields]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("E102 on press-3", "Unverified report by Li Wei, {date}: remedy: " + JUMPER),
        ("3号液压机 E102", "Li Wei 的未核实报告（{date}）：措施：" + JUMPER),
    ],
    ids=["en", "zh"],
)
def test_a_fix_reported_in_feedback_reads_as_an_unverified_report_not_a_closed_order(
    tmp_path, devices, question, expected
):
    store = WorkOrderStore(tmp_path / "work_orders.sqlite")
    report = store.report_fix(run_id="run-1", device_id="press-3", fault_code="E102", remedy=JUMPER, actor="Li Wei")
    obs = _observe(store, devices)
    [fix] = _past_fixes(obs)
    assert (fix["provenance"], fix["reported_by"], fix["reported_at"]) == (
        "unverified_report",
        "Li Wei",
        report.closed_at,
    )
    assert "confirmed_by" not in fix
    answer = render_text(build_document(question, [obs]))
    assert answer.splitlines()[-1] == expected.format(date=report.closed_at[:10])
    assert "Last fix" not in answer and "上次处理" not in answer


def test_a_closed_order_and_a_confirmed_report_are_recorded_fixes(tmp_path, devices):
    clock = [1_772_000_000.0]
    store = WorkOrderStore(tmp_path / "work_orders.sqlite", clock=lambda: clock[0])
    order = _fixed(store, "press-3", Fix(cause="coolant filter clogged", remedy="replaced the filter"))
    clock[0] += DAY
    store.report_fix(run_id="run-1", device_id="press-3", fault_code="E102", remedy="reseated the fan plug", actor="Li")
    store.confirm_report(run_id="run-1", reporter="Li", by="Chen")
    fixes = {f["past_work_order_id"]: f for f in _past_fixes(_observe(store, devices))}
    assert fixes[order.id]["provenance"] == "recorded" and "reported_by" not in fixes[order.id]
    assert (fixes["FB-run-1"]["provenance"], fixes["FB-run-1"]["confirmed_by"]) == ("recorded", "Chen")
    answer = render_text(build_document("E102 on press-3", [_observe(store, devices)]))
    assert "Last fix on this machine: FB-run-1" in answer and "Unverified" not in answer


def test_an_unverified_report_is_no_evidence_for_a_cause(tmp_path, devices):
    """A closed order's cause moves its cause up; the same words as one person's unverified report do not."""
    store = WorkOrderStore(tmp_path / "work_orders.sqlite")
    _fixed(store, "press-3", Fix(cause="motor fan blocked by dust", remedy="cleaned the fan"))
    obs = _observe(store, devices)
    entry = {
        "fault_code": "E102",
        "cause": "Motor overheating. Possible causes: a low coolant level; a blocked or failed motor fan; continuous "
        "overload.",
    }
    assert order_causes(entry, [obs])[0].text == "a blocked or failed motor fan"

    reported = obs.model_copy(
        update={
            "content": [
                item.model_copy(update={"fields": {**item.fields, "provenance": "unverified_report"}})
                if "past_work_order_id" in item.fields
                else item
                for item in obs.content
            ]
        }
    )
    ordered = order_causes(entry, [reported])
    assert ordered[0].text == "a low coolant level"
    assert all(not cause.evidence for cause in ordered)
