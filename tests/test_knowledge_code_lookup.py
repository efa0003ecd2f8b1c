"""Codes as manuals print them and technicians type them, looked up in a real index.

The index holds a drive guide whose fault table is keyed by display mnemonics (`oH1`, `Uv1`,
`CPF02`, `ocA`, `b.b.`) and padded codes (`E02`), with one fault shown only as a drawing of the
display beside its name, and a remote I/O module whose `66` and `E2` share second-tier keys with
the drive's `b.b.` and `E02` (tests/fixtures/hard_manuals.py).
"""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from knowledge.embed import Embedder
from knowledge.ingest.build import build_index
from knowledge.search import ManualIndex
from tests.fixtures.hard_manuals import (
    HardManual,
    Sheet,
    english_cover,
    make_io_module,
    make_mnemonic_codes,
    save,
)


@pytest.fixture(scope="module")
def drive(tmp_path_factory: pytest.TempPathFactory) -> HardManual:
    return make_mnemonic_codes(tmp_path_factory.mktemp("drive"))


@pytest.fixture(scope="module")
def index(drive: HardManual, tmp_path_factory: pytest.TempPathFactory) -> ManualIndex:
    folder = tmp_path_factory.mktemp("code-lookup")
    embedder = Embedder()
    db = folder / "codes.db"
    build_index([drive.path, make_io_module(folder).path], db, embedder=embedder)
    return ManualIndex(db, embedder=embedder)


@pytest.mark.parametrize(
    ("question", "printed"),
    [
        ("oH1", "oH1"),
        ("OH1", "oH1"),
        ("oh1 keeps coming back", "oH1"),
        ("drv UV1 at night", "Uv1"),
        ("inverter trip ocA", "ocA"),
        ("OCA", "ocA"),
        ("fault CPF02", "CPF02"),
        ("报警CPF02", "CPF02"),
        ("E-02?", "E02"),
        ("b.b.", "b.b."),
        ("display shows bb", "b.b."),
    ],
)
def test_codes_typed_as_printed_or_in_another_case(index: ManualIndex, question: str, printed: str) -> None:
    result = index.query(question)
    assert result.status == "ok" and result.hits[0].fault_code == printed
    assert result.hits[0].match == "exact"


@pytest.mark.parametrize(
    ("question", "printed"),
    [
        ("E1O2", "E102"),  # a letter O for the zero
        ("0H1 on the display", "oH1"),
        ("err CPF2", "CPF02"),  # padding
        ("Uv01", "Uv1"),
        ("E 1 O 2", "E102"),  # read out a character at a time
    ],
)
def test_lookalikes_and_padding_find_the_printed_code(index: ManualIndex, question: str, printed: str) -> None:
    result = index.query(question)
    assert result.status == "ok" and result.hits[0].fault_code == printed
    assert result.hits[0].match == "lookalike" and f"read as {printed}" in (result.message or "")


@pytest.mark.parametrize(("question", "printed"), [("66", "66"), ("E2", "E2"), ("alarm E02", "E02")])
def test_an_exact_code_beats_a_lookalike(index: ManualIndex, question: str, printed: str) -> None:
    result = index.query(question)
    assert [hit.fault_code for hit in result.hits] == [printed]
    assert result.hits[0].match == "exact"


def test_a_padded_code_typed_otherwise_finds_every_manual_that_pads_it_so(index: ManualIndex) -> None:
    result = index.lookup("E002")
    assert {hit.fault_code for hit in result.hits} == {"E02", "E2"}
    assert {hit.match for hit in result.hits} == {"lookalike"}


def test_a_code_printed_as_a_picture_is_found_by_its_name(drive: HardManual, index: ManualIndex) -> None:
    # Among the three hits the tool shows: an entry that shares one word with the name ranks above
    # the page, an entry being the better answer as a rule (knowledge.search.ranking).
    [named] = drive.queries
    for question in (named.text, f"what does {named.text} mean", "one motor phase is open"):
        result = index.query(question, k=3)
        assert any(
            hit.manual == drive.path.name
            and hit.page == named.page
            and all(word in f"{hit.title} {hit.snippet}".lower() for word in named.words)
            for hit in result.hits
        ), question


@pytest.mark.parametrize("question", ["drive shows F0003", "fault E777", "error code XY99 on the drive"])
def test_a_code_in_no_manual_is_not_found(index: ManualIndex, question: str) -> None:
    result = index.query(question)
    assert result.status == "not_found" and result.hits == []


def test_an_unknown_code_with_a_symptom_still_searches_the_symptom(index: ManualIndex) -> None:
    result = index.query("fault E777: heatsink overheat, cooling fan stopped")
    assert result.status == "ok" and result.hits[0].fault_code == "oH1"


def test_an_ordinary_word_in_the_manual_is_no_code(index: ManualIndex) -> None:
    assert "OC" not in index.codes()


def test_a_question_asking_more_than_its_code_also_gets_the_pages_that_say_more(index: ManualIndex) -> None:
    result = index.query("E2 since the firmware update, which parameter delays it?", k=3)
    assert result.hits[0].fault_code == "E2" and result.hits[0].kind == "entry"
    assert any(hit.kind == "page" and "P31" in hit.snippet for hit in result.hits[1:]), result.hits
    assert [hit.fault_code for hit in index.query("E2").hits] == ["E2"]  # the code alone: its entry alone


@pytest.mark.parametrize(
    "question", ["E2 every time it starts since we flashed release 3.2, what now?", "E2 每次上电都报 after release 3.2"]
)
def test_the_page_that_says_more_follows_a_found_code_however_few_of_its_words_it_shares(
    index: ManualIndex, question: str
) -> None:
    # The code was found, so the question has an answer: how few words it shares with the firmware note
    # (another language, a few words of a long question) decides the page's rank, not whether it is shown.
    result = index.query(question, k=3)
    assert result.hits[0].fault_code == "E2"
    assert any(hit.kind == "page" and "P31" in hit.snippet for hit in result.hits[1:]), result.hits


def test_another_makes_alarm_number_is_no_answer_where_the_named_manual_prints_the_number(
    tmp_path: Path, index: ManualIndex
) -> None:
    """A number is every make's alarm: the I/O module's entry `66` does not answer a question about a spindle
    drive whose manual prints alarm 66 only in its text (as a scanned alarm list no table was read from)."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, "Spindle Drive Maintenance Manual", "Southgate Spindles", "SG-40")
    sheet.heading("7 Alarms")
    sheet.paragraph(
        "When the controller overheats, the alarm LEDs show 66 and the spindle coasts to a stop: clean the"
        " heatsink fins and check that the cabinet fan runs before the reset."
    )
    spindle = save(doc, tmp_path / "spindle.pdf", "Spindle Drive Maintenance Manual", "written for the fixloop tests")
    db = tmp_path / "numbers.db"
    build_index([spindle, make_io_module(tmp_path).path], db, embedder=index.embedder)
    numbers = ManualIndex(db, embedder=index.embedder)
    result = numbers.query("SG-40 alarm 66")
    assert (result.hits[0].manual, result.hits[0].kind) == ("spindle.pdf", "page")
    assert "not in the" not in (result.message or "")
    # Asked of no machine, the code is the module's.
    assert [(hit.manual, hit.fault_code) for hit in numbers.query("alarm 66").hits] == [("remote_io.pdf", "66")]
