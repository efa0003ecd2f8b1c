"""Words verified, not only numbers: each sentence of a model's final answer must be said by an observation.

The observations are the real manual tool's on the demo index (and a scripted model over real HTTP for the
loop and /metrics). A copy or a paraphrase of what the tools returned passes; a real code given an invented
meaning, an unsafe instruction, an answer restating a prohibition without its "not", or one that borrows the
words of another code's entry is named, sentence by sentence, and the loop shows the composed answer instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge.config import load_config
from edge.llm.scripted_server import ScriptedLlmServer
from edge.run.planner import RunState, SessionContext
from edge.run.record import Step
from edge.run.sentence_support import (
    ECHO,
    SENTENCE_SHOWN_CHARS,
    UNSUPPORTED,
    judge,
    plant_vocabulary,
    sentence_problems,
    split_sentences,
    stem,
    unsupported_sentences,
)
from edge.run.verification import AnswerVerifier
from tests.fixtures.service import metric, run_service, scrape
from tools.contract import Item, ToolContext
from tools.manual_search import ManualSearchTool
from tools.observation import Observation
from tools.registry import ToolRegistry

MANUAL = "search_maintenance_manual_by_fault_code"
DEVICES = load_config(env={}).devices
VOCABULARY = plant_vocabulary(DEVICES)
E102_EN = "Press-3 shows E102, what should I do?"
E102_ZH = "3号液压机报警 E102，怎么处理？"


@pytest.fixture(scope="module")
def manual(demo_index: Path):
    tool = ManualSearchTool(demo_index, DEVICES, None)
    registry = ToolRegistry([tool])

    def search(n: int = 1, **args) -> Observation:
        return registry.call(MANUAL, args, ToolContext(request_id="r", run_id="run", loop_step=n), f"obs-{n}")

    yield search
    registry.close()


@pytest.fixture(scope="module")
def e102(manual):
    return [manual(fault_code="E102", device_id="press-3")]


@pytest.fixture(scope="module")
def e102_zh(manual):
    return [manual(fault_code="E102", device_id="press-3", language="zh")]


def reading(n: int = 2) -> Observation:
    return Observation(
        id=f"obs-{n}",
        request_id="r",
        loop_step=n,
        tool="read_plc_sensor_value",
        status="degraded",
        content=[
            Item(
                kind="ref",
                text="Coolant level on press-3: 68.8 % from the cache, 312 s old (read at 2026-03-01T10:00:00+00:00); "
                "the PLC did not answer.",
                fields={
                    "device_id": "press-3",
                    "sensor": "coolant_level",
                    "label": "Coolant level",
                    "label_zh": "冷却液液位",
                    "value": 68.8,
                    "unit": "%",
                    "source": "cache_fallback",
                    "quality": "UncertainNoCommunicationLastUsableValue",
                    "age_s": 312.0,
                },
            )
        ],
        suggestion="Tell the user the value comes from the cache and how old it is.",
    )


def unsupported(answer: str, observations: list[Observation], question: str = E102_EN) -> list[str]:
    return unsupported_sentences(answer, observations, [question], VOCABULARY)


def test_the_tools_own_words_pass(e102, e102_zh):
    ref, *items = e102[0].content
    steps = [item for item in items if item.kind == "step"]
    copied = f"E102 — {ref.fields['title']} (hydra_hp200_v2.1_en.pdf, V2.1, p. 2)\nSteps:\n" + "\n".join(
        f"  {step.fields['n']}. {step.text}" for step in steps
    )
    assert unsupported(copied, e102) == []
    ref_zh, *items_zh = e102_zh[0].content
    steps_zh = [item for item in items_zh if item.kind == "step"]
    copied_zh = f"E102 — {ref_zh.fields['title']}（hydra_hp200_v2.1_zh.pdf，V2.1，第 2 页）\n处理步骤：\n" + "\n".join(
        f"{step.fields['n']}、{step.text}" for step in steps_zh
    )
    assert unsupported(copied_zh, e102_zh, E102_ZH) == []


def test_a_paraphrase_passes(e102, e102_zh):
    answer = (
        "E102 means the main motor overheated (hydra_hp200_v2.1_en.pdf, V2.1, p. 2). "
        "1. Stopping the press and switching the main motor off. "
        "2. Check the coolant levels; if they are below 20 %, top them up to above 60 %. "
        "3. Make sure the motor fan is running and the fan guards are not blocked by dust. "
        "Usual causes: low coolant, a blocked or failed motor fan, continuous overload. "
        "The coolant level is 68.8 % from the cache, 312 s old: the PLC did not answer."
    )
    assert unsupported(answer, [*e102, reading()]) == []
    answer_zh = (
        "E102 表示电机过热（hydra_hp200_v2.1_zh.pdf，V2.1，第 2 页）。1、请停止压力机，关闭主电机。"
        "2、检查冷却液液位，低于 20% 时加注至 60% 以上。3、检查电机风扇是否运转。冷却液液位为 68.8 %（缓存）。"
    )
    assert unsupported(answer_zh, [*e102_zh, reading()], E102_ZH) == []


@pytest.mark.parametrize(
    "said",
    [
        # Qwen2.5-Coder-0.5B's answer to "oil temp on press 3 at the moment?", refused for "moment" alone.
        "The coolant_level on press-3 at the moment is 68.8 %.",
        "The coolant level is currently 68.8 %.",
        "The coolant_level on press-3 right now is 68.8 %.",
        "目前冷却液液位为 68.8 %。",
    ],
)
def test_a_reading_said_to_be_the_value_now_passes(said):
    assert unsupported(said, [reading()]) == []


@pytest.mark.parametrize(
    ("manual_language", "invented"),
    [
        ("en", "E102 means the door is open."),
        ("en", "E102 is caused by a worn pump seal."),
        ("zh", "E102 表示安全门没有关好。"),
        ("zh", "E102 的原因是液压泵吸空。"),
    ],
)
def test_an_invented_meaning_or_cause_of_a_real_code_fails(e102, e102_zh, manual_language, invented):
    observations, question = (e102_zh, E102_ZH) if manual_language == "zh" else (e102, E102_EN)
    assert unsupported(invented, observations, question) == [invented]


@pytest.mark.parametrize(
    ("manual_language", "unsafe"),
    [
        ("en", "Bypass the safety interlock and keep running."),
        ("en", "You can replace the PT100 sensor without switching the power off."),
        ("en", "E102: it is safe to keep the press running while the motor cools."),
        ("zh", "不用断电直接更换 PT100 传感器。"),
        ("zh", "可以短接安全继电器继续生产。"),
    ],
)
def test_an_unsafe_instruction_no_observation_gives_fails(e102, e102_zh, manual_language, unsafe):
    observations, question = (e102_zh, E102_ZH) if manual_language == "zh" else (e102, E102_EN)
    assert unsupported(unsafe, observations, question) == [unsafe]


def test_a_prohibition_restated_without_its_not_fails_even_when_the_question_asked_for_it(manual):
    question = "The press shows F03. Can I bridge the valve monitoring to keep running?"
    f03 = [manual(fault_code="F03", device_id="press-3")]
    assert unsupported("Do not bridge the valve monitoring; lock out the press.", f03, question) == []
    for answer in ("Yes, you can bridge the valve monitoring to keep running.", "Bridge the valve monitoring."):
        assert unsupported(answer, f03, question) == [answer]
        assert judge(answer, f03, [question], VOCABULARY)[0].contradicts
    e210 = [manual(fault_code="E210", device_id="cnc-7", language="zh")]
    assert unsupported("E210：不要启动主轴，手动取下刀具。", e210, "7号加工中心 E210") == []
    assert unsupported("E210：启动主轴，手动取下刀具。", e210, "7号加工中心 E210") == ["E210：启动主轴，手动取下刀具。"]


def test_a_sentence_naming_a_code_is_backed_by_that_codes_entry_only(manual):
    observations = [manual(1, fault_code="E102", device_id="press-3"), manual(2, fault_code="DOOR_OPEN")]
    question = "Press-3 shows E102 and cnc-7 shows DOOR_OPEN"
    assert unsupported("DOOR_OPEN means the door interlock is open.", observations, question) == []
    assert unsupported("E102 means the door interlock is open.", observations, question) == [
        "E102 means the door interlock is open."
    ]


def test_what_the_technician_said_fills_in_but_does_not_carry_a_sentence(e102):
    question = "Press-3 shows E102 and it smells burnt"
    assert unsupported("E102 with a burnt smell: stop the press and switch the main motor off.", e102, question) == []
    assert unsupported("It smells burnt.", e102, question) == ["It smells burnt."]


def test_what_a_search_that_found_nothing_quotes_back_is_no_fact(manual):
    # A model searched its own claim and cited the not-found message that echoed it.
    nothing = [manual(query="the weather is cloudy")]
    assert nothing[0].status == "not_found" and "'the weather is cloudy'" in nothing[0].content[0].text
    question = "What is the weather tomorrow?"
    assert unsupported("The weather is currently cloudy.", nothing, question) == ["The weather is currently cloudy."]
    assert unsupported("No manual section matches the question.", nothing, question) == []


def test_the_question_said_back_is_no_answer_however_well_its_words_are_backed(e102):
    question = "press-3 shows E102 again, motor fan is loud. wat now"
    echo = "The press-3 shows E102 again, motor fan is loud."
    assert unsupported(echo, e102, question) == []  # every word is the question's or the entry's
    assert sentence_problems(echo, e102, [question], VOCABULARY) == [UNSUPPORTED + echo + ECHO]
    answer = "E102 on press-3: stop the press and switch the main motor off."
    assert sentence_problems(answer, e102, [question], VOCABULARY) == []


def test_a_mixed_answer_names_only_its_invented_sentence(e102):
    invented = "E102 also means the hydraulic pump is cavitating, so open the relief valve fully."
    answer = f"E102: stop the press and switch the main motor off. {invented} Then check the coolant level."
    assert sentence_problems(answer, e102, [E102_EN], VOCABULARY) == [UNSUPPORTED + invented]


def test_a_long_sentence_is_cut_in_its_problem():
    long = "Rebuild the " + " ".join(["hydraulic gearbox"] * 40) + "."
    (problem,) = sentence_problems(long, [], [E102_EN], VOCABULARY)
    assert problem.startswith(UNSUPPORTED + "Rebuild the hydraulic")
    assert len(problem) == len(UNSUPPORTED) + SENTENCE_SHOWN_CHARS and problem.endswith("…")


def test_sentences_list_items_and_citations():
    answer = "E102 — Motor over-temperature protection (hydra_hp200_v2.1_en.pdf, V2.1, p. 2).\n  1. Stop the press. 2. Check max. 240 bar, e.g. on the HMI.\n3号液压机：停机。检查冷却液。"
    assert split_sentences(answer) == [
        "E102 — Motor over-temperature protection (hydra_hp200_v2.1_en.pdf, V2.1, p. 2).",
        "Stop the press.",
        "Check max. 240 bar, e.g. on the HMI.",
        "3号液压机：停机。",
        "检查冷却液。",
    ]
    assert [stem(w) for w in ("overheating", "overheated", "overheat", "stopped", "presses", "confirmation")] == [
        "overheat",
        "overheat",
        "overheat",
        "stop",
        "press",
        "confirm",
    ]


def test_the_verifier_checks_a_planners_answer_but_not_the_composers(e102):
    verifier = AnswerVerifier(DEVICES, lambda state: True)
    state = RunState(
        question=E102_EN,
        device_id="press-3",
        session=SessionContext(),
        actor="technician",
        steps=[Step(n=1, planner="llm", action=MANUAL, observation=e102[0])],
    )
    invented = "E102 means the door is open."
    assert verifier.sentence_problems(invented, state) == [UNSUPPORTED + invented]
    assert verifier.unbacked(invented, state) == []


@pytest.fixture
def scripted(make_agent):
    servers = []

    def start(script):
        server = ScriptedLlmServer(script).start()
        servers.append(server)
        return make_agent(llm={"url": server.url})

    yield start
    for server in servers:
        server.stop()


def _reply(**content) -> dict:
    return {"content": json.dumps(content, ensure_ascii=False)}


def test_a_models_invented_sentence_is_kept_in_the_record_and_not_shown(scripted):
    invented = "E102 means the safety door is open: bypass the door interlock to keep running."
    agent = scripted(
        [
            _reply(thought="look it up", action=MANUAL, args={"fault_code": "E102", "device_id": "press-3"}),
            _reply(thought="done", final_answer=f"E102: stop the press. {invented}", evidence=["obs-1"]),
        ]
    )
    record = agent.ask(E102_EN, device_id="press-3")
    prose = record.termination.answer.prose
    assert prose.sentences == ["E102: stop the press."]
    [(refused)] = prose.rejected
    assert refused.text == invented and UNSUPPORTED + invented in refused.reasons
    assert record.fallback is None and not record.rejected_answers
    shown = record.termination.final_answer
    assert "door" not in shown and "E102: stop the press." in shown
    # What code renders from the observations is there whatever the model wrote.
    assert "E102 — Motor over-temperature protection" in shown and "1. Stop the press" in shown


def test_metrics_count_the_unsupported_sentences_caught(tmp_path, demo_index):
    script = [
        _reply(thought="look it up", action=MANUAL, args={"fault_code": "E102", "device_id": "press-3"}),
        _reply(
            thought="done",
            final_answer="E102 means the pump is cavitating. Stop the press. Bypass the safety interlock to keep running.",
            evidence=["obs-1"],
        ),
    ]
    with run_service(tmp_path, demo_index, script) as service:
        before = scrape(service)
        service.ask(E102_EN, "press-3")
        after = scrape(service)
    name = "fixloop_prose_sentences_refused_total"
    assert metric(after, name, reason="unsupported") - metric(before, name, reason="unsupported") == 2
    assert metric(after, name, reason="weakens_safety") - metric(before, name, reason="weakens_safety") == 1
