"""Degraded mode: the rules planner applies the trigger rules with the real tools on the demo plant."""

from __future__ import annotations

import time

import pytest

from edge.lexicon import Lexicon
from edge.loop import RunRequest
from edge.planner import SessionContext

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
WORK_ORDER = "generate_work_order"


@pytest.fixture
def agent(make_agent, plc_sim):
    return make_agent()


def actions(record) -> list[str]:
    return [step.action for step in record.steps if step.action]


@pytest.mark.parametrize("question, device, codes, sensors", [
    ("Press-3 shows E102, what should I do?", ["press-3"], ["E102"], []),
    ("What is the coolant level on press-3 right now?", ["press-3"], [], ["coolant_level"]),
    ("3号液压机报警号 6065，冷却液液位现在多少？", ["press-3"], ["报警号 6065"], ["coolant_level"]),
    ("cnc 7 spindle temperature", ["cnc-7"], [], ["spindle_temp"]),
    ("DRV_FAULT and Err-07 on the cnc", ["cnc-7"], ["DRV_FAULT", "Err-07"], []),
])
def test_lexicon_finds_devices_codes_and_sensors(agent_config, question, device, codes, sensors):
    found = Lexicon(agent_config.devices).find(question)
    assert found.devices == device
    assert found.fault_codes == codes
    assert sorted({sensor for owner, sensor in found.sensors if owner == device[0]}) == sensors
    assert {ent.label_ for ent in found.doc.ents} >= {"DEVICE"}


def test_fault_code_question_searches_the_manual_first_and_answers(agent):
    record = agent.ask("Press-3 shows E102, what should I do?")
    assert actions(record)[0] == MANUAL
    assert record.steps[0].args == {"fault_code": "E102", "device_id": "press-3"}
    assert record.termination.reason == "final_answer"
    answer = record.termination.final_answer
    assert answer.startswith("Degraded mode") and "E102" in answer and "p." in answer
    assert WORK_ORDER not in actions(record)  # not asked for, and the CLI does not propose


def test_a_bare_number_the_manuals_know_is_a_fault_code(agent):
    record = agent.ask("cnc-7 shows 6065 on the HMI")
    assert record.steps[0].action == MANUAL and record.steps[0].args["fault_code"] == "6065"
    assert record.steps[0].observation.status == "ok"


def test_live_question_reads_the_plc(agent):
    record = agent.ask("What is the coolant level on press-3 right now?")
    assert actions(record) == [PLC]
    obs = record.steps[0].observation
    assert obs.status == "ok" and obs.content[0].fields["source"] == "live"
    assert obs.content[0].fields["unit"] in record.termination.final_answer


def test_chinese_question_gets_a_chinese_answer(agent):
    record = agent.ask("3号液压机出现E102故障，现在冷却液液位是多少？")
    assert actions(record)[:2] == [MANUAL, PLC]
    assert record.steps[0].observation.content[0].fields["language"] == "zh"  # the Chinese edition is quoted
    assert record.termination.final_answer.startswith("降级模式")
    assert "冷却液液位：" in record.termination.final_answer  # the sensor's Chinese label


def test_symptom_without_code_searches_by_description(agent):
    record = agent.ask("The motor on press-3 is hot", device_id="press-3")
    assert record.steps[0].action == MANUAL and "query" in record.steps[0].args
    assert record.steps[0].observation.status == "ok"


def test_work_order_request_creates_one_order_and_a_repeat_returns_it(agent):
    question = "Open a work order for press-3, fault E102, motor overheating"
    first = agent.ask(question, actor="operator")
    second = agent.ask(question, actor="operator")
    assert actions(first)[0] == MANUAL and actions(first)[-1] == WORK_ORDER
    orders = [run.steps[-2].observation.content[0].fields for run in (first, second)]
    assert orders[0]["created"] is True and orders[1]["created"] is False
    assert orders[0]["work_order_id"] == orders[1]["work_order_id"]
    assert orders[0]["work_order_id"] in second.termination.final_answer


def test_follow_up_in_a_session_reads_the_sensor_instead_of_searching_again(agent):
    session = SessionContext(device_id="press-3", fault_codes=["E102"], summary=["manual E102: motor over-temperature"])
    record = agent.run(RunRequest(question="and the coolant level?", session=session))
    assert actions(record) == [PLC]


def test_sensor_question_without_device_says_which_machine_is_missing(agent):
    record = agent.ask("What is the coolant level right now?")
    assert PLC not in actions(record)
    assert "which machine" in record.termination.final_answer


def test_an_opened_plc_breaker_is_queued_once_for_the_mes(make_agent, plc_sim):
    agent = make_agent(plc={"read_budget_ms": 150})
    plc_sim.silence("press-3")
    for _ in range(4):
        agent.ask("What is the coolant level on press-3 right now?")
    store = agent.registry.get(WORK_ORDER).store
    deadline = time.monotonic() + 5  # the notification is written off the read path
    while not (events := [row for row in store.outbox() if row.event_type == "plc.breaker_opened"]):
        assert time.monotonic() < deadline, "no breaker notification queued"
        time.sleep(0.05)
    time.sleep(0.3)
    events = [row for row in store.outbox() if row.event_type == "plc.breaker_opened"]
    assert len(events) == 1
    assert events[0].work_order_id is None and "press-3" in events[0].body
