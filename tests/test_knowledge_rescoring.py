"""The second look at the best candidates: where in a row the question's code and words are found, and
how the weights reorder the head of the first stage's list."""

from __future__ import annotations

import json

import pytest

from knowledge.rescoring import FEATURES, Question, RowWords, features, rescore, stored_words
from knowledge.tuning import Weights


def _row(**fields) -> dict:
    row = {
        "id": 1,
        "kind": "entry",
        "code": "",
        "title": "",
        "symptom": "",
        "cause": "",
        "steps": "[]",
        "snippet": "",
        "language": "en",
        "ocr": 0,
        "fault": 1,
    }
    row.update(fields)
    return row


ENTRY = _row(
    code="OH1",
    title="Heatsink overheat",
    cause="The cooling fan stopped or the ambient temperature is too high.",
    steps=json.dumps(["Clean the heatsink fins.", "Replace the cooling fan."]),
)
PAGE = _row(
    id=2,
    kind="page",
    title="Maintenance",
    snippet="After an OH1 trip, check the cooling fan every month.",
    fault=0,
)


def _features(row: dict, text: str, similarity: float = 0.0) -> dict[str, float]:
    question = Question.of(text, "", "en")
    return dict(zip(FEATURES, features(row, RowWords.of(row), question, similarity), strict=True))


@pytest.mark.parametrize("row", [ENTRY, PAGE, _row(kind="page", snippet="电机过热报警 E102, check the fan fan")])
def test_a_row_s_words_read_back_from_the_index_are_the_words_of_its_text(row):
    assert RowWords.stored(stored_words(row)) == RowWords.of(row)


def test_a_code_in_the_entrys_code_column_is_told_from_a_code_mentioned_in_a_page():
    entry, page = _features(ENTRY, "drive shows oh1"), _features(PAGE, "drive shows oh1")
    assert (entry["code_column"], entry["code_text"]) == (1.0, 0.0)
    assert (page["code_column"], page["code_text"]) == (0.0, 1.0)
    assert (entry["entry"], page["entry"], entry["fault"], page["fault"]) == (1.0, 0.0, 1.0, 0.0)


def test_the_question_s_words_are_placed_in_the_name_the_cause_or_the_remedy():
    named = _features(ENTRY, "heatsink overheating")
    assert named["name_words"] == 1.0 and named["remedy_words"] == 0.5 and named["cause_words"] == 0.0
    cause = _features(ENTRY, "fan stopped")
    assert cause["cause_words"] == 1.0 and cause["name_words"] == 0.0 and cause["word_pairs"] == 1.0
    assert _features(ENTRY, "replace fans")["remedy_words"] == 1.0  # stemmed: fans is fan
    assert _features(ENTRY, "conveyor belt slips")["row_words"] == 0.0


def test_a_chinese_question_is_matched_on_an_english_row_through_its_translation():
    question = Question.of("散热器过热", "heatsink overheat", "zh")
    found = dict(zip(FEATURES, features(ENTRY, RowWords.of(ENTRY), question, 0.5), strict=True))
    assert found["name_words"] == 1.0 and found["same_language"] == 0.0 and found["similarity"] == 0.5


def test_weights_reorder_the_head_and_leave_the_tail():
    ranked = [(PAGE, 0.03, "lexical"), (ENTRY, 0.029, "lexical"), (_row(id=3, code="X9"), 0.01, "semantic")]
    question = Question.of("oh1 fan", "", "en")
    head = [features(row, RowWords.of(row), question, 0.0) for row, _, _ in ranked[:2]]
    unchanged = rescore(ranked, head, Weights())
    assert [row["id"] for row, _, _ in unchanged] == [2, 1, 3]
    moved = rescore(ranked, head, Weights(code_column=0.5))
    assert [row["id"] for row, _, _ in moved] == [1, 2, 3]
    assert moved[0][1] == pytest.approx(0.029 * 2.718281828**0.5)


def test_a_word_pair_weight_puts_the_row_that_holds_the_words_together_first():
    together = _row(id=4, title="Fan stopped", cause="The cooling fan stopped turning.")
    apart = _row(id=5, title="Stopped axis", cause="Check the fan filter; the axis stopped.")
    ranked = [(apart, 0.031, "lexical"), (together, 0.03, "lexical")]
    question = Question.of("cooling fan stopped", "", "en")
    head = [features(row, RowWords.of(row), question, 0.0) for row, _, _ in ranked]
    assert [row["id"] for row, _, _ in rescore(ranked, head, Weights(word_pairs=1.0))] == [4, 5]
    assert [row["id"] for row, _, _ in rescore(ranked, head, Weights())] == [5, 4]
