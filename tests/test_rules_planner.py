"""Degraded mode: the rules planner applies the trigger rules with the real tools on the demo plant."""

from __future__ import annotations

import re
import time

import pytest

from edge.rules.lexicon import Lexicon
from edge.rules.value_questions import sensor_implied
from edge.run.loop import RunRequest
from edge.run.planner import SessionContext

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
WORK_ORDER = "generate_work_order"


@pytest.fixture
def agent(make_agent, plc_sim):
    return make_agent()


def actions(record) -> list[str]:
    return [step.action for step in record.steps if step.action]


@pytest.mark.parametrize(
    "question, device, codes, sensors",
    [
        ("Press-3 shows E102, what should I do?", ["press-3"], ["E102"], []),
        ("What is the coolant level on press-3 right now?", ["press-3"], [], ["coolant_level"]),
        ("3号液压机报警号 6065，冷却液液位现在多少？", ["press-3"], ["报警号 6065"], ["coolant_level"]),
        ("cnc 7 spindle temperature", ["cnc-7"], [], ["spindle_temp"]),
        ("DRV_FAULT and Err-07 on the cnc", ["cnc-7"], ["DRV_FAULT", "Err-07"], []),
        # Typed without a space before the Chinese, the machine's id was read as a fault code.
        ("cnc-7主轴有异响", ["cnc-7"], [], []),
        ("press-3冷却液液位现在多少", ["press-3"], [], ["coolant_level"]),
        # A sensor's longer words typed one edit off are that sensor; a short word's typo is not.
        ("Press 3 - motor temp and coolent level pls", ["press-3"], [], ["coolant_level", "motor_temp"]),
        ("motor temperture on press 3", ["press-3"], [], ["motor_temp"]),
        ("cnc 7 speedy", ["cnc-7"], [], []),
    ],
)
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


@pytest.mark.parametrize(
    ("question", "device", "read"),
    [
        ("cnc-7 judders on every pass and the finish comes out rough", "cnc-7", ["vibration"]),
        ("7号加工中心一吃刀就抖得厉害", "cnc-7", ["vibration"]),
        ("the hydraulic oil on press-3 is scorching hot and the stroke is sluggish", "press-3", ["oil_temp"]),
    ],
)
def test_a_symptom_told_by_one_sensors_quantity_reads_that_sensor_beside_the_manual(agent, question, device, read):
    record = agent.ask(question)
    assert record.steps[0].action == MANUAL and "query" in record.steps[0].args
    readings = [step.args for step in record.steps if step.action == PLC]
    assert all({"device_id": device, "sensor": sensor} in readings for sensor in read)


def test_a_quantity_two_sensors_measure_implies_neither_unless_the_words_say_what_it_is_of(agent_config):
    press = agent_config.devices["press-3"]
    assert sensor_implied("the machine is scorching hot", press) is None  # motor or oil: no guess
    assert sensor_implied("the hydraulic oil is scorching hot", press) == "oil_temp"
    assert sensor_implied("the ram leaks oil", press) is None  # no quantity at all


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


@pytest.mark.parametrize(
    "question, codes, unknown",
    [
        ("press-3 showing E1O2", ["E102"], []),  # a letter O for a zero
        ("hmi on press-3 says El04", ["E104"], []),  # a letter l for a one
        ("press 3 error E 104", ["E104"], []),
        ("press-3: e.103 came up", ["E103"], []),
        ("cnc7 says 6O65", ["6065"], []),
        ("数控机床故障码 O4101", ["04101"], []),
        ("Press-3: Ｅ１０５ on the screen", ["E105"], []),
        ("line-4 is down", [], ["line-4"]),
        ("press-9 shows E102", ["E102"], ["press-9"]),
        ("cnc-12 alarm 6065", ["alarm 6065"], ["cnc-12"]),
        ("5号液压机报警E102", ["E102"], ["5号液压机"]),
        ("The machining centre 7 shows fault 6066", ["fault 6066"], []),  # part of "CNC machining centre 7"
        ("cnc-7 6065", ["6065"], []),
        ("err-102 on press-3", ["E102"], []),  # a cue word standing for the code's letter
        ("press-3 flashing ERR 105", ["E105"], []),
        ("err 07 on press 3", ["err 07"], []),  # not E07: the manual tool finds Err-07 by it
        # A kind of machine the plant has none of, whatever code it shows (E104 is a press code here).
        ("lift truck 2 has E104 on its display", ["E104"], ["lift truck 2"]),
        ("6号天车报警 F02", ["F02"], ["6号天车"]),
        ("cnc-7 运行车削程序时报警 6065", ["报警 6065"], []),  # 运行车削: "running a turning", no crane
        ("the boiler is making a knocking noise", [], []),  # no number: the manuals may cover it
    ],
)
def test_lexicon_reads_loosely_typed_codes_and_names_unknown_machines(
    agent_config, demo_index, question, codes, unknown
):
    from knowledge.search import ManualIndex

    index = ManualIndex(demo_index)
    try:
        found = Lexicon(agent_config.devices, index.codes()).find(question)
    finally:
        index.close()
    assert found.fault_codes == codes
    assert found.unknown_devices == unknown


def test_a_value_question_finds_its_sensor_by_the_plants_own_labels_and_units():
    from edge.rules.value_questions import sensors_asked
    from tools.plant import DeviceConfig

    # A machine the demo does not have, with sensors no synonym list names.
    pump = DeviceConfig.model_validate(
        {
            "id": "pump-1",
            "sensors": {
                "bearing_temp": {
                    "label": "Drive-end bearing temperature",
                    "label_zh": "驱动端轴承温度",
                    "address": 0,
                    "unit": "°C",
                    "plausible_min": -20,
                    "plausible_max": 150,
                },
                "casing_temp": {
                    "label": "Pump casing temperature",
                    "address": 1,
                    "unit": "°C",
                    "plausible_min": -20,
                    "plausible_max": 150,
                },
                "flow": {
                    "label": "Discharge flow",
                    "address": 2,
                    "unit": "l/min",
                    "plausible_min": 0,
                    "plausible_max": 900,
                },
                "suction": {
                    "label": "Suction pressure",
                    "address": 3,
                    "unit": "bar",
                    "plausible_min": 0,
                    "plausible_max": 10,
                },
            },
        }
    )
    assert sensors_asked("how warm is the bearing?", pump) == ["bearing_temp"]
    assert sensors_asked("轴承有多烫", pump) == ["bearing_temp"]
    assert sensors_asked("how much is it flowing", pump) == ["flow"]
    assert sensors_asked("how many bar on the suction side", pump) == ["suction"]
    assert sensors_asked("how hot is it", pump) == ["bearing_temp", "casing_temp"]  # both temperatures
    assert sensors_asked("what colour is it", pump) == []
    # Asked for every one: all of the kind, or every sensor when no kind is named.
    assert sensors_asked("every temperature", pump, every=True) == ["bearing_temp", "casing_temp"]
    assert sensors_asked("all the readings", pump, every=True) == ["bearing_temp", "casing_temp", "flow", "suction"]


@pytest.mark.parametrize(
    "question, asks",
    [
        ("is the bearing hot enough?", True),
        ("suction pressure too low?", True),
        ("is it flowing more than it should", True),
        ("轴承温度正常吗", True),
        ("泵的流量够不够", True),
        ("every temperature on the pump", True),
        ("所有温度", True),
        ("The bearing is too hot to touch", False),  # reported, not asked
        ("why is the bearing too hot?", False),  # asks for the cause
        ("it keeps tripping every shift", False),
    ],
)
def test_a_judgement_asked_of_a_value_is_a_value_question(question, asks):
    from edge.rules.value_questions import asks_for_value

    assert asks_for_value(question) is asks


def test_a_follow_up_reads_the_sensors_the_last_answer_named_or_the_other_one_of_their_kind(agent):
    from edge.run.sessions import session_context

    first = agent.ask("what's the motor temperature on press-3?")
    session = session_context([first])
    assert session.device_id == "press-3" and session.sensors == ["motor_temp"]
    again = agent.run(RunRequest(question="and is that normal?", session=session))
    assert actions(again) == [PLC] and again.steps[0].args["sensor"] == "motor_temp"
    other = agent.run(RunRequest(question="那另一个呢？", session=session))
    assert actions(other) == [PLC] and other.steps[0].args["sensor"] == "oil_temp"  # the press's other °C sensor
    # Without earlier readings the same words point at nothing: no reading is guessed.
    fresh = agent.run(RunRequest(question="and is that normal?", session=SessionContext(device_id="press-3")))
    assert PLC not in actions(fresh)


@pytest.mark.parametrize("question", ["what about the machining centre?", "那7号加工中心的呢？"])
def test_a_follow_up_that_names_another_machine_reads_the_same_sensors_there(agent, question):
    from edge.run.sessions import session_context

    session = session_context([agent.ask("coolant level on press-3 now?")])
    assert session.sensors == ["coolant_level"]
    record = agent.run(RunRequest(question=question, session=session))
    assert actions(record) == [PLC] and record.steps[0].args == {"device_id": "cnc-7", "sensor": "coolant_level"}


@pytest.mark.parametrize("question", ["that one's too high, what should I do?", "偏高了吧，手册里怎么处理？"])
def test_a_follow_up_asking_what_to_do_about_a_reading_searches_the_manual_in_that_readings_words(agent, question):
    from edge.run.sessions import session_context

    session = session_context([agent.ask("cnc-7 vibration now?")])
    record = agent.run(RunRequest(question=question, session=session))
    assert actions(record) == [MANUAL, PLC]
    assert record.steps[0].args["query"].startswith(("Spindle vibration ", "主轴振动 "))
    assert record.steps[0].observation.content[0].fields["fault_code"] == "6066"


@pytest.mark.parametrize(
    ("question", "sensor"),
    [
        ("cnc 7 spindle vib ok at the moment?", "vibration"),  # "vib" is vibration, "spindle" no speed
        ("is the oil on press 3 in the red?", "oil_temp"),  # "in the red" judges the value
    ],
)
def test_shop_talk_for_a_quantity_or_a_judgement_reads_that_sensor_only(agent, question, sensor):
    record = agent.ask(question)
    assert actions(record) == [PLC] and record.steps[0].args["sensor"] == sensor


def test_a_sensor_asked_about_in_a_clause_of_its_own_is_read_before_the_manual_is_searched(agent):
    record = agent.ask("cnc 7 coolant level? the pump sounds strange and the nozzles spit")
    assert actions(record)[:2] == [PLC, MANUAL] and record.steps[0].args["sensor"] == "coolant_level"
    # A clause that goes on to describe what the sensor does is a symptom first.
    record = agent.ask("cnc 7 coolant level keeps dropping, the pump sounds strange")
    assert actions(record)[0] == MANUAL


@pytest.mark.parametrize("question", ["cnc-7 E220, need a WO raised", "cnc-7 E220, put in WOs for both shifts"])
def test_wo_in_capitals_asks_for_a_work_order_and_lower_case_wo_does_not(agent, question):
    assert WORK_ORDER in actions(agent.ask(question, actor="operator"))
    assert WORK_ORDER not in actions(agent.ask(question.replace("WO", "wo"), actor="operator"))


def test_slang_and_spoken_chinese_are_searched_with_the_manuals_own_words(agent):
    record = agent.ask("液压机触摸屏点了没反应")
    assert record.steps[0].args["query"] == "液压机触摸屏点了没反应 无反应"
    record = agent.ask("cnc-7 rattles in the cut")
    # No symptom word the rules know: the machine's name is the search's scope, not words to match.
    assert record.steps[0].args == {"query": "the machine rattles in the cut vibration", "device_id": "cnc-7"}


def test_a_value_question_without_a_sensor_word_reads_the_sensor_and_searches_nothing(agent):
    record = agent.ask("3号液压机电机有多热？")
    assert actions(record) == [PLC] and record.steps[0].args == {"device_id": "press-3", "sensor": "motor_temp"}
    assert "主电机温度：" in record.termination.final_answer


@pytest.mark.parametrize("question", ["", "   ", "??", "\n"])
def test_a_blank_question_is_asked_for_without_a_tool_call(agent, question):
    record = agent.ask(question, device_id="press-3")
    assert actions(record) == [] and record.termination.reason == "final_answer"
    assert "Please ask a question" in record.termination.final_answer


@pytest.mark.parametrize(
    "question, named",
    [
        ("line-4 is down, what do I do?", "line-4"),
        ("press-9 shows E102", "press-9"),
        ("5号液压机报警 E103", "5号液压机"),
        ("chiller 1 shows E103, what now", "chiller 1"),
        ("2号空压机温度现在多少", "2号空压机"),
    ],
)
def test_an_unknown_machine_is_named_and_nothing_is_looked_up_for_it(agent, question, named):
    record = agent.ask(question)
    assert actions(record) == []
    assert named in record.termination.final_answer and "press-3, cnc-7" in record.termination.final_answer


def test_a_question_longer_than_the_query_limit_is_searched_by_its_symptom(agent):
    from edge.rules.planner import QUERY_MAX_CHARS

    chatter = "We restarted it twice, called the shift lead and read the logs without finding anything. " * 4
    question = chatter + "Now oil is leaking under the press and the ram moves slowly. " + chatter
    assert len(question) > QUERY_MAX_CHARS
    record = agent.ask(question, device_id="press-3")
    assert record.steps[0].action == MANUAL and record.steps[0].observation.status == "ok"
    query = record.steps[0].args["query"]
    assert len(query) <= QUERY_MAX_CHARS and "oil is leaking" in query and "logs" not in query


@pytest.mark.parametrize("question", ["open a work order for press-3", "给3号液压机开个工单"])
def test_a_work_order_without_a_fault_asks_for_the_code_and_searches_nothing(agent, question):
    record = agent.ask(question, actor="operator")
    assert actions(record) == []


@pytest.mark.parametrize(
    "question, proposed",
    [
        ("press-3 shows E102", True),
        ("cnc-7 shows E110", False),  # the press's code: not this machine's fault
        ("press-3 shows E777", False),  # no manual knows it
    ],
)
def test_a_work_order_is_proposed_only_for_a_fault_the_manual_lists_for_this_machine(agent, question, proposed):
    record = agent.run(RunRequest(question=question, propose_work_order=True, require_confirmation=True))
    assert (WORK_ORDER in actions(record)) is proposed


def test_another_machines_code_is_not_found_for_this_one_and_reads_no_sensor_of_it(agent):
    record = agent.ask("cnc-7 shows E110")  # the press's "coolant level low": cnc-7 has a coolant level too
    assert actions(record) == [MANUAL]
    observation = record.steps[0].observation
    # Where it is listed is said; the press's steps are no procedure for the machining centre.
    assert observation.status == "not_found" and [item.kind for item in observation.content] == ["text"]
    assert "Hydra HP-200" in observation.content[0].text and "other machines" in observation.content[0].text
    assert "Steps" not in record.termination.final_answer


def test_each_code_is_looked_up_for_the_machine_it_is_said_of(agent):
    record = agent.ask("Press-3 shows F03 and cnc-7 shows DOOR_OPEN")
    assert [(step.args["fault_code"], step.args["device_id"]) for step in record.steps if step.action == MANUAL] == [
        ("F03", "press-3"),
        ("DOOR_OPEN", "cnc-7"),
    ]
    assert all(step.observation.status == "ok" for step in record.steps if step.action == MANUAL)


@pytest.mark.parametrize(
    "question",
    [
        "3号液压机报警 6065",
        "加工中心报警号 8123 是什么",
        "5号液压机报警 E103",
        "液压机的冷却水够不够",
        "7号加工中心主轴现在转速多少",
        "给3号液压机开个工单",
    ],
)
def test_a_chinese_answer_is_chinese_throughout(agent, question):
    answer = agent.ask(question).termination.final_answer
    # Codes, units, file names, device ids and quality names stay as printed; no English sentence does.
    assert not re.search(r"[A-Za-z]{2,}(?:[ ,;:]+[A-Za-z]{2,}){2,}", answer), answer


_ENGLISH_SENTENCE = re.compile(r"[A-Za-z]{2,}(?:[ ,;:]+[A-Za-z]{2,}){2,}")
_CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.mark.parametrize(
    "question, actor",
    [
        ("3号液压机报警 E102，怎么处理？", "technician"),
        ("7号加工中心主轴振动很大，表面很差", "technician"),
        ("3号液压机电机有多热？", "technician"),
        ("给7号加工中心 E210 开一个工单", "operator"),
    ],
)
def test_a_chinese_run_thinks_in_chinese(agent, question, actor):
    record = agent.ask(question, actor=actor)
    thoughts = [step.thought for step in record.steps]
    assert thoughts and all(thoughts)
    for thought in thoughts:
        assert _CJK.search(thought) and not _ENGLISH_SENTENCE.search(thought), thought


def test_an_english_run_thinks_in_english(agent):
    record = agent.ask("Open a work order for press-3, fault E102, motor overheating", actor="operator")
    thoughts = [step.thought for step in record.steps]
    assert len(thoughts) >= 3 and all(_ENGLISH_SENTENCE.search(t) and not _CJK.search(t) for t in thoughts)


def test_the_loops_own_words_follow_the_run_language(make_agent, plc_sim):
    agent = make_agent(loop={"max_steps": 1})
    chinese = agent.ask("3号液压机报警 E102，怎么处理？").termination
    assert chinese.reason == "max_steps" and chinese.missing == ["提前结束：步数预算已用完"]
    assert "提前结束" in chinese.final_answer and not _ENGLISH_SENTENCE.search(chinese.final_answer)
    english = agent.ask("Press-3 shows E102, what should I do?").termination
    assert english.missing == ["stopped early: the step budget ran out"]
