"""Retrieval on the demo index: exact codes, scopes, versions, symptoms, not-found answers."""

import shutil
import sqlite3
from pathlib import Path

import pytest

from knowledge.models import Scope
from knowledge.onnx_encoder import encoder_path
from knowledge.search import IndexMissing, ManualIndex

PRESS = Scope(vendor="Hydra", model="HP-200", label="press-3")
CNC = Scope(vendor="Meridian", model="VMC-850", label="cnc-7")


@pytest.fixture(scope="module")
def index(demo_index: Path) -> ManualIndex:
    return ManualIndex(demo_index)


def test_e102_on_the_press_is_motor_over_temperature_with_page_and_version(index):
    [hit] = index.lookup("E102", PRESS).hits
    assert (hit.fault_code, hit.title, hit.match, hit.applies_to_device) == (
        "E102",
        "Motor over-temperature protection",
        "exact",
        True,
    )
    assert (hit.manual, hit.version, hit.page, hit.language) == ("hydra_hp200_v2.1_en.pdf", "V2.1", 2, "en")
    assert hit.steps[0].startswith("Stop the press") and "coolant_level" in hit.steps[1]
    assert "steps differ in V1.2" in hit.version_compatibility


def test_the_older_manual_version_on_request(index):
    [hit] = index.lookup("E102", PRESS, version="1.2").hits
    assert hit.version == "V1.2" and hit.steps[2] == "Let the motor cool down for 30 minutes."
    missing = index.lookup("E120", PRESS, version="V1.2")
    assert missing.status == "not_found" and "V2.1" in missing.suggestion
    assert "not in the V1.2 manual" in index.lookup("E120", PRESS).hits[0].version_compatibility


def test_a_version_typed_in_the_question_asks_that_manual(index):
    """`on the HP-200 V1.2`: the technician reads the older manual's steps, as if the version had been passed."""
    [hit] = index.query("E102 on the HP-200 V1.2").hits
    assert hit.version == "V1.2" and hit.steps[2] == "Let the motor cool down for 30 minutes."
    assert index.query("E102 on the HP-200 V7").hits[0].version == "V2.1"  # no such manual: the newest


def test_one_code_two_meanings(index):
    assert index.lookup("E102", CNC).hits[0].title == "Spindle encoder communication fault"
    both = index.lookup("e-102")
    assert {(h.scope, h.applies_to_device) for h in both.hits} == {("Hydra HP-200", None), ("Meridian VMC-850", None)}
    assert "different things" in both.message
    elsewhere = index.lookup("6065", PRESS)
    assert elsewhere.hits[0].applies_to_device is False and "not in the manuals for press-3" in elsewhere.message


@pytest.mark.parametrize(
    ("typed", "code", "scope"),
    [
        ("ALARM 1", "ALARM:1", CNC),
        ("alarm:2", "ALARM:2", CNC),
        ("01204", "XX204", CNC),
        ("err 07", "Err-07", PRESS),
        ("drv fault", "DRV_FAULT", PRESS),
        ("报警号 6065", "6065", CNC),
        ("error:22", "error:22", CNC),
        ("04101", "04101", CNC),
    ],
)
def test_codes_as_typed_find_the_printed_code(index, typed, code, scope):
    assert index.query(typed, scope).hits[0].fault_code == code


def test_unknown_code_suggests_near_codes(index):
    result = index.lookup("E109", PRESS)
    assert result.status == "not_found" and result.hits == []
    assert "E110" in result.message and "describe the symptom" in result.suggestion


@pytest.mark.parametrize(
    ("symptom", "scope", "code"),
    [
        ("the motor is hot", PRESS, "E102"),
        ("电机过热", PRESS, "E102"),
        ("spindle head is burning hot", CNC, "6065"),
        ("主轴很烫", CNC, "6065"),
        ("touch screen frozen, numbers not updating", PRESS, "Err-07"),
    ],
)
def test_symptoms_find_their_codes(index, symptom, scope, code):
    hits = index.query(symptom, scope).hits
    assert code in [h.fault_code for h in hits[:3]]
    assert hits[0].match in ("lexical", "semantic") and 0 < hits[0].score <= 1


def test_chinese_symptoms_answer_from_the_chinese_edition(index):
    assert index.query("电机过热", PRESS).hits[0].language == "zh"


def test_nonsense_is_not_found_with_a_suggestion(index):
    result = index.query("zxqv wplk", PRESS)
    assert result.status == "not_found" and "fault code" in result.suggestion


def test_a_code_asked_about_a_machine_no_manual_is_about_is_not_another_machines_answer(index):
    result = index.query("Danfoss FC302 shows E102")
    assert result.status == "not_found" and result.hits == []
    assert "Danfoss FC302" in result.message and "E102" in result.message and "Hydra" in result.message
    # The machine the technician stands at is known: its code is looked up there.
    assert index.query("Danfoss FC302 shows E102", PRESS).hits[0].fault_code == "E102"


def test_a_missing_index_is_a_clear_error(tmp_path):
    with pytest.raises(IndexMissing, match="fixloop index build"):
        ManualIndex(tmp_path / "nothing.sqlite").lookup("E102")


def test_an_index_of_schema_6_with_the_second_looks_words_answers_the_same(index, demo_index, tmp_path):
    older = tmp_path / "older.sqlite"
    shutil.copy(demo_index, older)
    identity = index.embedder.identity
    if encoder_path(demo_index, identity).exists():
        shutil.copy(encoder_path(demo_index, identity), encoder_path(older, identity))
    with sqlite3.connect(older) as conn:  # as a build of schema 6 left it: each row's words for the second look
        conn.execute("ALTER TABLE records ADD COLUMN words TEXT")
        conn.execute(
            """UPDATE records SET words = '{"name":[],"body":[],"cause":[],"remedy":[],"code":[],"text_codes":[]}'"""
        )
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema'")
    for symptom, scope in (("the motor is hot", PRESS), ("主轴很烫", CNC)):
        assert ManualIndex(older).query(symptom, scope) == index.query(symptom, scope)
