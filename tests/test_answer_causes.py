"""Causes ordered by this run's evidence, through the real service and the PLC simulator: a live reading
past its limit puts its cause first, a normal one moves it down, a past order's recorded cause counts,
and with no usable evidence the manual's order stands. Cause lists are read from the manual's words."""

from __future__ import annotations

import pytest

from edge.run.causes import split_causes
from tests.fixtures.past import seed_fixes
from tests.fixtures.service import E102, run_service
from tools.work_orders.model import Fix

MANUAL_ORDER = ["a low coolant level", "a blocked or failed motor fan", "continuous overload"]


@pytest.fixture
def plant(tmp_path, demo_index):
    with run_service(tmp_path, demo_index) as running:
        yield running


def causes_shown(answer: str) -> tuple[str, list[str]]:
    lines = answer.splitlines()
    [start] = [i for i, line in enumerate(lines) if line.startswith("Probable causes")]
    listed = []
    for line in lines[start + 1 :]:
        if not line.startswith("  ") or not line.strip()[0].isdigit():
            break
        listed.append(line.strip().split(". ", 1)[1])
    return lines[start], listed


def test_a_reading_past_its_limit_puts_its_cause_first_and_says_why(plant):
    plant.sim.set_value("press-3", "coolant_level", 12.0)
    header, listed = causes_shown(plant.ask(E102, "press-3").termination["final_answer"])
    assert header.startswith("Probable causes, the likeliest first by this run's evidence")
    assert listed[0] == "a low coolant level — Coolant level reads 12.0 %, past its low alarm limit"
    assert [line.split(" — ")[0] for line in listed[1:]] == MANUAL_ORDER[1:]


def test_a_normal_reading_moves_its_cause_down_and_a_past_orders_cause_counts(plant):
    [order] = seed_fixes(plant, "press-3", "E102", [Fix(cause="motor fan blocked by dust", remedy="cleaned the fan")])
    _, listed = causes_shown(plant.ask(E102, "press-3").termination["final_answer"])
    assert [line.split(" — ")[0] for line in listed] == [
        "a blocked or failed motor fan",
        "continuous overload",
        "a low coolant level",
    ]
    assert f"the cause found when {order.id} was closed" in listed[0]
    assert "within its limits" in listed[2]


def test_with_the_plc_silent_the_manuals_order_stands(plant):
    plant.sim.silence("press-3")
    header, listed = causes_shown(plant.ask(E102, "press-3").termination["final_answer"])
    assert header.startswith("Probable causes, in the manual's order")
    assert listed == MANUAL_ORDER


def test_a_chinese_run_orders_the_chinese_manuals_causes_by_the_same_evidence(plant):
    plant.sim.set_value("press-3", "coolant_level", 12.0)
    answer = plant.ask("3号压机报E102，怎么处理？", "press-3").termination["final_answer"]
    assert "可能原因（按本次读数和记录，可能性大的在前）：" in answer
    assert "  1. 冷却液液位低 — 冷却液液位读数为 12.0 %，已低于低报警限值" in answer


@pytest.mark.parametrize(
    ("text", "causes"),
    [
        ("Overheat. Possible causes: fan failure; blocked air filter; ambient above 40 °C.", 3),
        ("常见原因是冷却液液位低、电机风扇堵塞或损坏，或持续过载。", 3),
        ("Output short circuit or earth fault.", 0),
        ("The motor winding temperature exceeded 85 °C.", 0),
    ],
)
def test_a_cause_list_is_read_from_the_manuals_words(text, causes):
    assert len(split_causes(text)) == causes
