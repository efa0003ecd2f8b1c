"""The anti-hallucination check: every code, value and order id of an answer must come from an observation."""

from __future__ import annotations

import pytest

from edge.config import load_config
from edge.run.grounding import collect_evidence, ungrounded
from tools.contract import Item
from tools.observation import Observation

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"


def obs(n: int, tool: str, *items: Item, status: str = "ok") -> Observation:
    return Observation(id=f"obs-{n}", request_id="req-1", loop_step=n, tool=tool, status=status, content=list(items))


E102 = obs(
    1,
    MANUAL,
    Item(
        kind="ref",
        text="E102 — Motor over-temperature protection (Hydra HP-200; hydra_hp200_v2.1_en.pdf, p. 2, V2.1)",
        fields={
            "fault_code": "E102",
            "title": "Motor over-temperature protection",
            "manual": "hydra_hp200_v2.1_en.pdf",
            "version": "V2.1",
            "page": 2,
        },
    ),
    Item(kind="step", text="Stop the press and switch the main motor off.", fields={"n": 1}),
    Item(
        kind="step",
        text="Check the coolant level (sensor coolant_level); top up to above 60 % if it is below 20 %.",
        fields={"n": 2},
    ),
    Item(kind="step", text="Measure the supply voltage on all three phases (400 V ±10 %).", fields={"n": 3}),
)
COOLANT = obs(
    2,
    PLC,
    Item(
        kind="ref",
        text="Coolant level on press-3: 61.2 % from the cache, 5 min old.",
        fields={
            "sensor": "coolant_level",
            "value": 61.234,
            "unit": "%",
            "age_s": 312.4,
            "source": "cache_fallback",
            "plausible_range": [0.0, 100.0],
        },
    ),
)
ORDER = obs(
    3,
    "generate_work_order",
    Item(kind="ref", text="Work order created.", fields={"work_order_id": "WO-4988F0A1E7E3986F", "fault_code": "E102"}),
)
QUESTION = "Press-3 shows E102, what should I do?"


@pytest.fixture(scope="module")
def evidence():
    return collect_evidence([E102, COOLANT, ORDER], QUESTION, load_config(env={}).devices)


def test_an_answer_built_from_the_observations_is_grounded(evidence):
    answer = (
        "E102 — Motor over-temperature protection (hydra_hp200_v2.1_en.pdf, V2.1, p. 2)\n"
        "Steps:\n  1. Stop the press and switch the main motor off.\n"
        "  2. Check the coolant level: it reads 61.2 % (cache, 5 min old), above the 20 % limit.\n"
        "  3. Measure the supply voltage on all three phases (400V ±10 %).\n"
        "Work order WO-4988F0A1E7E3986F created for press-3 / E102. Evidence: obs-1, obs-2, obs-3."
    )
    assert ungrounded(answer, evidence) == []


@pytest.mark.parametrize(
    "invented, named",
    [
        ("Set the relief valve to 187 bar.", "value 187"),
        ("This is like F03, the safety valve fault.", "fault code F03"),
        ("I opened work order WO-0123456789ABCDEF.", "work order WO-0123456789ABCDEF"),
        ("The coolant level is 61.9 %.", "value 61.9"),
        ("The reading is 9 min old.", "value 9 min"),
    ],
)
def test_each_invented_fact_is_named(evidence, invented, named):
    assert ungrounded(f"E102: stop the press. {invented}", evidence) == [named]


def test_a_tool_named_in_an_answer_is_no_fault_code_but_a_sensor_id_no_device_has_still_is(evidence):
    # Qwen2.5-Coder-0.5B: "The tool read_plc_sensor_value is missing." (no PLC call was made).
    assert ungrounded("The tool read_plc_sensor_value is missing. Call generate_work_order.", evidence) == []
    assert ungrounded("The oil_temp and system_pressure are live.", evidence) == ["fault code SYSTEMPRESSURE"]


def test_a_value_matches_to_the_precision_the_answer_writes(evidence):
    assert ungrounded("Coolant 61 %.", evidence) == []
    assert ungrounded("Coolant 61.23 %.", evidence) == []
    assert ungrounded("Coolant 61.3 %.", evidence) == ["value 61.3"]


def test_a_duration_matches_the_seconds_an_observation_gives(evidence):
    assert ungrounded("from the cache, 5 min old", evidence) == []
    assert ungrounded("from the cache, 312 s old", evidence) == []
    assert ungrounded("缓存值，5 分钟前", evidence) == []


def test_chinese_answers_with_full_width_punctuation_and_plant_names(evidence):
    answer = "3号液压机 E102：冷却液液位：61.2 %（缓存，5 min 前），第 2 页。1、停机。2、检查冷却液。"
    assert ungrounded(answer, evidence) == []


def test_what_the_question_said_may_be_repeated():
    evidence = collect_evidence(
        [obs(1, MANUAL, Item(kind="text", text="No entry for this code."), status="not_found")],
        "Press-3 shows E999 at 92 degrees, what is that?",
        load_config(env={}).devices,
    )
    assert ungrounded("E999 is not in the manuals of press-3; at 92 degrees stop the press.", evidence) == []
    assert ungrounded("E999 means the same as E998.", evidence) == ["fault code E998"]


def test_a_bare_numeric_code_is_checked_too():
    manual = obs(
        1,
        MANUAL,
        Item(
            kind="ref",
            text="6066 — Spindle vibration excessive",
            fields={"fault_code": "6066", "title": "Spindle vibration excessive", "page": 2},
        ),
    )
    evidence = collect_evidence([manual], "cnc-7 shows fault 6066", load_config(env={}).devices)
    assert ungrounded("Fault 6066: spindle vibration excessive (p. 2).", evidence) == []
    assert ungrounded("Fault 6066, often after alarm 6065.", evidence) == ["fault code 6065"]


def test_manual_names_and_pages_must_be_ones_the_manual_search_returned(evidence):
    assert ungrounded("E102: see hydra_HP200_v2.1_en.pdf, p. 2.", evidence) == []
    assert ungrounded("E102: see hydra_pump_guide.pdf.", evidence) == ["manual hydra_pump_guide.pdf"]
    assert ungrounded("E102: see p. 12 of the manual.", evidence) == ["page 12"]
    assert ungrounded("E102：见第 7 页。", evidence) == ["page 7"]


def test_a_proposed_order_backs_no_order_id():
    proposal = obs(
        1,
        "generate_work_order",
        Item(
            kind="ref",
            text="Awaits confirmation.",
            fields={
                "device_id": "press-3",
                "fault_code": "E102",
                "work_order_status": "pending_confirmation",
                "work_order_id": "WO-4988F0A1E7E3986F",
            },
        ),
    )
    evidence = collect_evidence([proposal], QUESTION, load_config(env={}).devices)
    assert ungrounded("Work order WO-4988F0A1E7E3986F is open.", evidence) == ["work order WO-4988F0A1E7E3986F"]
