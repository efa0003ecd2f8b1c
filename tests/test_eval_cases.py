"""The regression case set and its file format: clear errors for a bad line, the coverage the project promises."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from edge.config import load_config
from edge.evaluation.cases import CaseFileError, load_cases
from edge.evaluation.scoring import CaseScore
from edge.evaluation.summary import Baseline, baseline_of, regressions, summarise

CASES = Path(__file__).parent / "eval" / "cases.jsonl"
PHRASING = Path(__file__).parent / "eval" / "phrasing.jsonl"
GOOD = {"id": "ok", "question": "Press-3 shows E102", "expect": {"fault_codes": ["E102"]}}


@pytest.fixture(scope="module")
def devices():
    return load_config(env={}).devices


def test_the_project_set_covers_what_the_field_asks(devices):
    cases = load_cases(CASES, devices)
    tags = Counter(tag for case in cases for tag in case.tags)
    assert len(cases) >= 60
    for tag in (
        "en",
        "zh",
        "fault_code",
        "symptom",
        "sensor",
        "work_order",
        "multi_intent",
        "session",
        "no_answer",
        "broken_sensor",
        "plc_outage",
    ):
        assert tags[tag] >= 2, f"fewer than two cases tagged {tag}"
    assert tags["zh"] >= 15
    assert {case.fault.kind for case in cases if case.fault} == {"broken_sensor", "plc_outage"}
    assert any(case.session for case in cases) and any(case.actor == "mes" for case in cases)


def test_the_phrasing_set_asks_the_way_technicians_type(devices):
    cases = load_cases(PHRASING, devices)
    tags = Counter(tag for case in cases for tag in case.tags)
    assert len(cases) >= 60 and tags["en"] >= 25 and tags["zh"] >= 20
    for tag in (
        "value",
        "loose_code",
        "unknown_device",
        "blank",
        "long",
        "other_machine",
        "work_order",
        "no_answer",
        "session",
        "plc_outage",
        "broken_sensor",
    ):
        assert tags[tag] >= 1, f"no case tagged {tag}"
    assert tags["value"] >= 15 and tags["loose_code"] >= 15 and tags["unknown_device"] >= 4
    # New questions, not the project set's asked again.
    assert not {case.question for case in cases} & {case.question for case in load_cases(CASES, devices)}


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"id": "a", "question": ', "cases.jsonl:2: not valid JSON"),
        (
            json.dumps({**GOOD, "id": "b", "expect": {"first_tool": "search_manual"}}),
            "cases.jsonl:2: expect.first_tool",
        ),
        (json.dumps({**GOOD, "id": "c", "colour": "red"}), "cases.jsonl:2: colour: Extra inputs are not permitted"),
        (json.dumps({**GOOD, "id": "d", "device_id": "press-9"}), "unknown device 'press-9'"),
        (json.dumps({**GOOD, "id": "e", "fault": {"kind": "broken_sensor", "device_id": "press-3"}}), "needs 'sensor'"),
        (
            json.dumps(
                {**GOOD, "id": "f", "fault": {"kind": "broken_sensor", "device_id": "press-3", "sensor": "rpm"}}
            ),
            "device 'press-3' has no sensor 'rpm'",
        ),
        (json.dumps({**GOOD, "id": "g", "expect": {"sensors": ["humidity"]}}), "no device has a sensor 'humidity'"),
        (json.dumps(GOOD), "case id 'ok' is used twice"),
    ],
)
def test_a_bad_line_is_named(tmp_path, devices, line, message):
    with pytest.raises(CaseFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_cases(write(tmp_path, json.dumps(GOOD), line), devices)


def test_blank_lines_and_comments_are_skipped_and_an_empty_file_is_refused(tmp_path, devices):
    assert [c.id for c in load_cases(write(tmp_path, "// a comment", "", json.dumps(GOOD)), devices)] == ["ok"]
    with pytest.raises(CaseFileError, match="holds no cases"):
        load_cases(write(tmp_path, "// nothing"), devices)
    with pytest.raises(CaseFileError, match="case file not found"):
        load_cases(tmp_path / "missing.jsonl")


def score(passed: bool, **metrics) -> CaseScore:
    return CaseScore(grounded=True, language=True, passed=passed, planner="rules", **metrics)


def test_the_summary_rates_each_metric_over_the_cases_that_ask_for_it():
    scores = {"a": score(True, first_tool=True), "b": score(False, first_tool=False, sensor=True), "c": score(True)}
    summary = summarise(scores)
    assert summary.metrics["first_tool"].model_dump() == {"passed": 1, "applicable": 2, "rate": 0.5}
    assert summary.metrics["sensor"].rate == 1.0 and summary.metrics["manual"].rate is None
    assert summary.metrics["passed"].rate == round(2 / 3, 4) and summary.failed == ["b"]


def test_a_score_below_the_baseline_is_a_regression_naming_the_cases():
    before = {"a": score(True, first_tool=True), "b": score(True, first_tool=True)}
    baseline = Baseline.model_validate_json(baseline_of(summarise(before), before).model_dump_json())
    assert regressions(summarise(before), baseline) == []
    after = {"a": score(True, first_tool=True), "b": score(False, first_tool=False)}
    found = regressions(summarise(after), baseline)
    assert "first_tool: 50.0% is below the baseline 100.0%" in found
    assert found[-1] == "cases that passed in the baseline and fail now: b"
