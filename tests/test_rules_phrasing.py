"""The rules planner on phrasing its rules were not written for: one test per mechanism, on our own wording.

Each misroute a fresh question showed (issue 36) is fixed by a general rule, and each rule is tested here with
questions that appear in no case set: a symptom told in a sensor's words, judgement words, follow-ups without
a code, a machine's name typed one edit off, an order declined, terminal and connector labels, and a question
no manual covers that names its machine.
"""

from __future__ import annotations

import pytest

from edge.rules.lexicon import Lexicon
from edge.rules.planner import RulesPlanner
from edge.run import RunState
from edge.run.loop import RunRequest
from edge.run.planner import SessionContext

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
WORK_ORDER = "generate_work_order"


@pytest.fixture
def agent(make_agent, plc_sim):
    agent = make_agent()
    # As the service does at start-up: a cold SBERT model or spaCy would eat the rules' 3 s wall budget on a
    # loaded box, and the run would stop before the reading these tests are about.
    agent.warm()
    return agent


@pytest.fixture
def known_codes(demo_index) -> set[str]:
    from knowledge.search import ManualIndex

    index = ManualIndex(demo_index)
    try:
        return index.codes()
    finally:
        index.close()


def actions(record) -> list[str]:
    return [step.action for step in record.steps if step.action]


def intent_of(devices, question: str, session: SessionContext | None = None):
    planner = RulesPlanner(devices)
    return planner.analyse(
        RunState(question=question, device_id=None, session=session or SessionContext(), actor="technician")
    )


def test_a_symptom_told_in_a_sensors_words_searches_the_manual_and_reads_the_sensor(agent):
    record = agent.ask("oil temp on press-3 keeps rising all shift and the ram gets sluggish")
    assert actions(record) == [MANUAL, PLC]
    assert "query" in record.steps[0].args and record.steps[1].args["sensor"] == "oil_temp"
    record = agent.ask("3号液压机压力一直往上冲，溢流阀那里在叫")
    assert actions(record) == [MANUAL, PLC] and record.steps[1].args["sensor"] == "hydraulic_pressure"
    # Naming sensors to be read says nothing about them: no search.
    assert actions(agent.ask("press-3 oil temp and coolant level please")) == [PLC, PLC]


@pytest.mark.parametrize(
    "question, sensors",
    [
        ("3号液压机液压够不够", ["hydraulic_pressure"]),  # enough of a pressure, not of the coolant
        ("press-3 hydraulics: enough to run?", ["hydraulic_pressure"]),
        ("press 3 both temperatures", ["motor_temp", "oil_temp"]),
        ("3号液压机两个温度报一下", ["motor_temp", "oil_temp"]),
        ("3号液压机油温多少度", ["oil_temp"]),  # the degrees are the oil's, not every °C sensor's
    ],
)
def test_judgement_words_pick_the_sensors_they_are_about(agent_config, question, sensors):
    assert sorted(intent_of(agent_config.devices, question).sensors) == sensors


@pytest.mark.parametrize(
    "question, sensors",
    [
        ("空调滤网多久换一次？", []),  # 空 of 空调 (air conditioner) is no tank running empty
        ("车间空气滤芯什么时候换", []),
        ("满载运行时要注意什么", []),
        ("3号液压机冷却液快空了吗？", ["coolant_level"]),
        ("3号液压机的冷却液箱满不满", ["coolant_level"]),
    ],
)
def test_empty_and_full_are_a_tanks_only_when_said_of_it(agent_config, question, sensors):
    assert intent_of(agent_config.devices, question).sensors == sensors


@pytest.mark.parametrize(
    "session, question, sensors, codes",
    [
        (SessionContext(device_id="press-3", sensors=["oil_temp"]), "and the motor side?", ["motor_temp"], []),
        (SessionContext(device_id="press-3", sensors=["oil_temp"]), "主电机那个呢", ["motor_temp"], []),
        (
            SessionContext(device_id="cnc-7", fault_codes=["E210"]),
            "what do I get ready before pulling the tool?",
            [],
            ["E210"],
        ),
        (SessionContext(device_id="cnc-7", fault_codes=["6065"]), "那再开机之前查什么", [], ["6065"]),
    ],
)
def test_a_follow_up_without_a_code_keeps_the_sessions_device_code_and_sensor(
    agent_config, session, question, sensors, codes
):
    intent = intent_of(agent_config.devices, question, session)
    assert intent.device_id == session.device_id
    assert (intent.sensors, intent.codes, intent.symptom) == (sensors, codes, False)


def test_a_follow_up_files_the_order_on_the_sessions_fault_with_the_priority_asked(agent):
    session = SessionContext(device_id="press-3", fault_codes=["E105"])
    record = agent.run(RunRequest(question="right, log it, urgent", session=session, actor="operator"))
    assert actions(record) == [WORK_ORDER]
    assert record.steps[0].args["fault_code"] == "E105" and record.steps[0].args["priority"] == "urgent"
    record = agent.run(
        RunRequest(question="好，帮我开个单", session=SessionContext("cnc-7", ["E220"]), actor="operator")
    )
    assert actions(record) == [WORK_ORDER] and record.steps[0].args["fault_code"] == "E220"


def test_a_machine_typed_one_edit_off_is_that_machine_and_the_answer_says_so(agent, agent_config):
    record = agent.ask("prees-3 motor temp right now")
    assert actions(record) == [PLC] and record.steps[0].args == {"device_id": "press-3", "sensor": "motor_temp"}
    assert "Read “prees-3” as press-3 (Hydraulic press 3)." in record.termination.final_answer
    record = agent.ask("7号加工中兴主轴温度多少")
    assert actions(record) == [PLC] and record.steps[0].args["device_id"] == "cnc-7"
    assert "“7号加工中兴”按 cnc-7（7号加工中心）理解。" in record.termination.final_answer
    # Another number is another machine, typed well or not; a short name one edit off is some other word.
    lexicon = Lexicon(agent_config.devices)
    assert lexicon.find("prees-9 motor temp").unknown_devices == ["prees-9"]
    assert lexicon.find("they press the button").devices == []


@pytest.mark.parametrize(
    "question",
    [
        "E103 on press-3, tell me the fix, no work order needed",
        "press-3 shows E103 but don't open a ticket",
        "3号液压机E103，暂时不要开工单",
    ],
)
def test_an_order_declined_is_neither_opened_nor_proposed(agent, question):
    record = agent.run(RunRequest(question=question, propose_work_order=True, require_confirmation=True))
    assert actions(record)[0] == MANUAL and WORK_ORDER not in actions(record)


def test_an_order_asked_for_is_still_proposed(agent):
    record = agent.run(RunRequest(question="press-3 E103, open a ticket", require_confirmation=True))
    assert WORK_ORDER in actions(record)


@pytest.mark.parametrize(
    "question, labels",
    [
        ("the feedback lead at X7 is chafed", ["X7"]),
        ("J5 came loose on the drive", ["J5"]),
        ("CN4插头松了", ["CN4"]),
        ("the wire on terminal A12 is burnt", ["A12"]),  # beside a word for a terminal
    ],
)
def test_wiring_labels_are_no_fault_codes(agent_config, known_codes, question, labels):
    found = Lexicon(agent_config.devices, known_codes).find(question)
    assert found.fault_codes == [] and found.wiring_labels == labels


def test_a_code_the_manuals_list_beside_a_connector_word_is_still_a_code(agent_config, known_codes):
    found = Lexicon(agent_config.devices, known_codes).find("connector E102 on cnc-7, and plug X12 is loose")
    assert found.fault_codes == ["E102"] and found.wiring_labels == ["X12"]


def test_a_symptom_naming_a_connector_is_searched_without_the_label(agent):
    record = agent.ask("cnc-7 spindle stops with a jerk since the X7 plug fell out")
    assert actions(record)[0] == MANUAL and "X7" not in record.steps[0].args["query"]


@pytest.mark.parametrize(
    "question",
    [
        "液压机旁边的灭火器多久检查一次",
        "加工中心操作员要什么资质",
        "press-3: where do I park the forklift?",
    ],
)
def test_a_question_no_manual_covers_is_not_found_though_it_names_its_machine(agent, question):
    record = agent.ask(question)
    assert actions(record) == [MANUAL] and record.steps[0].observation.status == "not_found"
    # Said once, as one sentence: the tool's own words inside the answer's.
    answer = record.termination.final_answer
    assert "nothing found for No" not in answer and ".." not in answer and "。." not in answer, answer
