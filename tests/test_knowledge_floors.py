"""The not-found floors: a question whose meaning rests on words no manual holds (a machine or a part the library
does not cover) is `not_found`, though it shares generic words (alarm, reset, motor) with some page; a real
symptom question, put in words of its own, still finds its entry."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from knowledge.models import Scope
from knowledge.search import Evidence, ManualIndex
from knowledge.search.floors import unread_share, without_words, words_no_row_holds
from knowledge.tuning import Tuning

PRESS = Scope(vendor="Hydra", model="HP-200", label="press-3")
FORKLIFT = "how do I reset the battery alarm on the forklift"


@pytest.fixture(scope="module")
def index(demo_index: Path) -> ManualIndex:
    return ManualIndex(demo_index)


def test_a_question_about_a_machine_no_manual_covers_is_not_found(index, demo_index):
    found = index.candidates(FORKLIFT)
    assert set(words_no_row_holds(found.snapshot, found.question, Scope())) == {"forklift", "battery"}
    assert found.evidence.unread_measured > 0.2
    assert index.query(FORKLIFT).status == "not_found"
    # The floors alone let it through to a page sharing `reset` and `alarm`: the words no row holds turned it.
    unraised = ManualIndex(demo_index, tuning=replace(Tuning(), unread_factor=0.0))
    assert unraised.query(FORKLIFT).status == "ok"


def test_a_chinese_question_about_a_kind_of_machine_no_manual_holds_is_not_found(index):
    """The glossary has no 挖掘机 (excavator), so the English model never reads it: what is left (hydraulic oil
    too hot) is the press's E103, which it answers without the excavator."""
    assert index.query("挖掘机液压油温度过高怎么办").status == "not_found"
    assert index.query("液压油温度过高怎么办").hits[0].fault_code == "E103"
    # German says what a compound is by its last word: a screw compressor's oil is no press's.
    assert index.query("Schraubenkompressor Öltemperatur zu hoch").status == "not_found"
    assert index.query("Öltemperatur zu hoch").status == "ok"


@pytest.mark.parametrize(
    ("symptom", "code"),
    [("the motor gets awfully hot", "E102"), ("the spindle is scorching hot", "6065")],
)
def test_a_symptom_in_words_no_manual_uses_still_finds_its_entry(index, symptom, code):
    assert index.candidates(symptom).evidence.unread_measured > 0  # `awfully`, `scorching`: how it was put, not what
    assert index.query(symptom).hits[0].fault_code == code


def test_at_a_known_machine_words_no_manual_holds_raise_nothing(index):
    question = "touch screen frozen, numbers not updating"
    assert index.candidates(question).evidence.unread_measured > 0
    assert index.candidates(question, PRESS).evidence.unread_measured == 0.0
    named = index.candidates("the HP-200 touch screen is not updating")  # names its manual
    assert named.evidence.unread_measured == 0.0
    assert index.query(question, PRESS).hits[0].fault_code == "Err-07"


def test_the_words_are_taken_out_of_what_the_model_reads():
    assert without_words("the forklift battery, alarm", ["forklift", "battery"], language_read=True) == "the alarm"
    # A Chinese question is read in its English rendition: a word leaves it as the glossary renders it, and a
    # word the glossary does not know was never in it.
    assert without_words("battery alarm reset", ["电池", "叉车"], language_read=False) == "alarm reset"


def test_the_share_of_meaning_is_what_the_words_take_away():
    vector = np.array([0.6, 0.8], dtype=np.float32)
    assert unread_share(vector, vector) == pytest.approx(0.0)
    assert unread_share(vector, np.array([0.8, 0.6], dtype=np.float32)) == pytest.approx(0.04)
    assert unread_share(vector, None) == 1.0  # nothing is left of the question


def test_the_floors_rise_with_the_share_of_meaning_no_row_holds():
    close = Evidence(similarity=0.5, coverage=0.0, concepts=0.0, agreed=False)
    assert not close.unanswered(Tuning())
    assert replace(close, unread=0.3).unanswered(Tuning())
    assert not replace(close, unread=0.3).unanswered(replace(Tuning(), unread_factor=0.0))


def test_the_unread_share_is_measured_only_where_the_answer_turns_on_it():
    measured = []

    def measure() -> float:
        measured.append(True)
        return 0.3

    far = Evidence(similarity=0.1, coverage=0.0, concepts=0.0, agreed=False, measure_unread=measure)
    assert far.unanswered(Tuning()) and not measured  # fails the floors at their lowest: nothing to measure
    close = Evidence(similarity=0.5, coverage=0.0, concepts=0.0, agreed=False, measure_unread=measure)
    assert close.unanswered(Tuning()) and measured == [True]
    assert close.unanswered(Tuning()) and measured == [True]  # measured once
