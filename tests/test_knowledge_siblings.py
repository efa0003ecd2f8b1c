"""Codes as a technician types them beside the product's name, in a library that holds its sibling's manual too,
and codes printed with marks around them in a table's cells (tests/fixtures/sibling_manuals.py).

The Tidewell TW-40 and TW-90 inverters share a series name and some codes: `E02` means one thing on each, `E07`
and `E09` are the TW-40's alone (the TW-90's manual names `E09` only in a firmware note). The Quillon QX-5's
alarm table prints `[A12]`, `A13:`, `*A14*`, `Err.15`, `AL-16/` and `A17(1)`. A workshop's troubleshooting
notes name no vendor or model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.embed import Embedder
from knowledge.ingest.build import build_index
from knowledge.models import Scope
from knowledge.search import ManualIndex
from knowledge.tuning import Tuning
from tests.fixtures.hard_manuals import make_mnemonic_codes
from tests.fixtures.sibling_manuals import (
    KS3_ROWS,
    MARKED_ROWS,
    WP7_ROWS,
    Siblings,
    make_german_controller,
    make_siblings,
    make_unlabelled_notes,
)
from tools.contract import ToolContext
from tools.manual_search import ManualSearchTool
from tools.registry import ToolRegistry


@pytest.fixture(scope="module")
def siblings(tmp_path_factory: pytest.TempPathFactory) -> Siblings:
    return make_siblings(tmp_path_factory.mktemp("siblings"))


@pytest.fixture(scope="module")
def index(siblings: Siblings, tmp_path_factory: pytest.TempPathFactory) -> ManualIndex:
    folder = tmp_path_factory.mktemp("sibling-index")
    embedder = Embedder()
    db = folder / "siblings.db"
    # A third drive manual that prints `E02` as well: the code alone names no machine.
    build_index(
        [
            siblings.tw40,
            siblings.tw90,
            siblings.marked,
            siblings.numbered,
            siblings.counted,
            make_mnemonic_codes(folder).path,
            make_unlabelled_notes(folder),
        ],
        db,
        embedder=embedder,
    )
    return ManualIndex(db, embedder=embedder)


@pytest.mark.parametrize(
    "question",
    [
        "what does E02 mean on the Tidewell TW-90",
        "Tidewell TW-90 inverter E02",
        "TW-90 inverter E02",
        "tw90 fault E02?",
    ],
)
def test_the_product_named_beside_a_code_scopes_it_to_that_products_manual(index: ManualIndex, question: str) -> None:
    result = index.query(question)
    assert result.status == "ok"
    assert [(hit.manual, hit.fault_code, hit.title) for hit in result.hits if hit.match == "exact"] == [
        ("tidewell_tw90.pdf", "E02", "Mains undervoltage")
    ]
    assert "different things" not in result.message


def test_a_siblings_meaning_of_the_code_found_besides_is_marked_another_machines(index: ManualIndex) -> None:
    """The words beside the code (`Brannock`) find the TW-40's `E02` as well: listed after the TW-90's, as the
    TW-40's."""
    result = index.query("Brannock TW90 E02")
    assert (result.hits[0].manual, result.hits[0].fault_code) == ("tidewell_tw90.pdf", "E02")
    others = [hit for hit in result.hits if hit.manual != "tidewell_tw90.pdf"]
    assert others and all(hit.applies_to_device is False for hit in others)


def test_a_symptom_asked_beside_the_model_is_answered_from_that_models_manual(index: ManualIndex) -> None:
    result = index.query("Tidewell TW-90 heatsink too hot, fan blocked")
    assert result.status == "ok"
    assert (result.hits[0].manual, result.hits[0].fault_code) == ("tidewell_tw90.pdf", "E05")


def test_at_the_machine_its_manual_answers_before_a_sheet_of_no_machine_in_particular(index: ManualIndex) -> None:
    """The workshop's notes name no vendor or model, so they are in every machine's scope, as nothing rules them
    out; their words match the question better, yet the machine's own manual answers first."""
    question = "unit too hot, cooling fan blocked"
    assert index.query(question).hits[0].manual == "workshop_notes.pdf"
    result = index.query(question, Scope(vendor="Brannock Drives Ltd.", model="TW-90"), k=10)
    assert (result.hits[0].manual, result.hits[0].fault_code) == ("tidewell_tw90.pdf", "E05")
    assert "workshop_notes.pdf" in [hit.manual for hit in result.hits]


@pytest.mark.parametrize("scope", [None, Scope(vendor="Brannock Drives Ltd.", model="TW-90")])
def test_the_product_a_question_names_is_not_reported_as_a_code_no_manual_lists(
    index: ManualIndex, scope: Scope | None
) -> None:
    """The linker reads `TW-90` as code-shaped (the QX-5 prints `AL-16`), but the question names the product with
    it: nothing answers, and the technician is told no section matches, not that the code `TW-90` is unlisted."""
    result = index.query("TW-90 makes a whistling sound at night", scope)
    assert result.status == "not_found"
    assert result.message.startswith("No manual section matches") and "code" not in result.message


def test_a_number_the_machines_numbered_alarm_table_skips_is_no_alarm_of_it(index: ManualIndex) -> None:
    """The OP-5 lists alarms 1 to 8 but 6, and prints a 6 elsewhere (`fewer than 6 of the clamp bolts`): its table
    says it has no alarm 6, which no page sharing the question's words answers. Alarm 7 is in the table."""
    for scope in (None, Scope(vendor="Ostrava Presses", model="OP-5")):
        result = index.query("Ostrava OP-5 alarm 6", scope)
        assert result.status == "not_found" and "code '6'" in result.message
        assert index.query("Ostrava OP-5 alarm 7", scope).hits[0].title == "Slide overrun"


def test_a_display_code_whose_number_the_machines_numbered_table_prints_alone_is_that_alarm(index: ManualIndex) -> None:
    """The OP-5's panel shows `AL7` where its alarm table prints `7`: that row answers, at the machine or named."""
    for question, scope in (
        ("Ostrava OP-5 shows AL7", None),
        ("panel shows AL7", Scope(vendor="Ostrava Presses", model="OP-5")),
    ):
        result = index.query(question, scope)
        assert (result.status, result.hits[0].manual, result.hits[0].title) == (
            "ok",
            "ostrava_op5.pdf",
            "Slide overrun",
        )
    # No machine known: the number alone says nothing of whose alarm `AL7` is.
    assert ("ostrava_op5.pdf", "7") not in [(hit.manual, hit.fault_code) for hit in index.query("AL7").hits]


def test_the_machine_a_question_names_is_searched_when_none_of_its_rows_made_the_rankings(
    index: ManualIndex, siblings: Siblings, tmp_path: Path
) -> None:
    """In a large library each ranking keeps few rows of many: here one. The English inverters' rows hold the
    question's words, the WP-7's say the glossary's German for them more often than the KS-3's, so no KS-3 row is
    kept; the question names the KS-3, and asked at it, its own fault answers."""
    embedder = index.embedder  # loaded once for the module
    manuals = [
        siblings.tw40,
        siblings.tw90,
        make_german_controller(tmp_path, "Kesselsteuerung KS-3", "KS-3", KS3_ROWS),
        make_german_controller(tmp_path, "Wärmepumpe WP-7", "WP-7", WP7_ROWS),
    ]
    build_index(manuals, tmp_path / "german.db", embedder=embedder)
    small = ManualIndex(tmp_path / "german.db", embedder=embedder, tuning=Tuning(candidates=1))
    result = small.query("KS-3 power stage overtemperature, fan blocked")
    assert (result.status, result.hits[0].manual, result.hits[0].fault_code) == ("ok", "ks3.pdf", "F02")
    # What only the inverters' manuals say is no answer about the KS-3: their page is another machine's.
    assert small.query("KS-3 stored parameters failed their checksum").status == "not_found"
    assert small.query("stored parameters failed their checksum").hits[0].fault_code == "E09"


def test_a_german_noun_is_no_machine_no_manual_is_about(index: ManualIndex) -> None:
    """German capitalises every noun: `Wechselrichter` (inverter) names no machine, as `Danfoss` would."""
    result = index.query("Wechselrichter zeigt Fehler E02, was tun?")
    assert result.status == "ok" and {hit.fault_code for hit in result.hits} == {"E02"}


def test_a_model_number_in_a_question_is_no_code(index: ManualIndex) -> None:
    result = index.query("TW-90 E55")
    assert result.status == "not_found" and "'E55'" in result.message and "TW-90'" not in result.message
    # The series word printed by both siblings' manuals names neither: the question is about both.
    result = index.query("Tidewell inverter E02")
    assert {hit.manual for hit in result.hits if hit.match == "exact"} >= {"tidewell_tw40.pdf", "tidewell_tw90.pdf"}
    assert result.message.startswith("Code E02 means different things")  # as printed, not `inverter E02`


@pytest.mark.parametrize("question", ["what does E07 mean on the Tidewell TW-90", "TW-90 shows E07"])
def test_a_code_only_a_sibling_lists_is_reported_as_the_siblings(index: ManualIndex, question: str) -> None:
    result = index.query(question)
    assert result.status == "not_found"
    assert result.message.startswith("Code E07 is not in the Tidewell TW-90 Inverter Manual")
    assert "Tidewell TW-40 Inverter Manual" in result.message
    assert [(hit.manual, hit.fault_code) for hit in result.hits] == [("tidewell_tw40.pdf", "E07")]
    assert all(hit.applies_to_device is False for hit in result.hits)


@pytest.mark.parametrize(
    ("question", "scope"),
    [
        ("TW-90 inverter shows E55, encoder signal lost", None),
        ("E55 and the encoder signal is lost", Scope(vendor="Brannock Drives Ltd.", model="TW-90")),
    ],
)
def test_a_code_the_machines_manuals_print_nowhere_is_not_found_though_other_words_match(
    index: ManualIndex, question: str, scope: Scope | None
) -> None:
    """The encoder words match the TW-90's E11, but the machine's manual lists no E55: no entry of it answers."""
    result = index.query(question, scope)
    assert result.status == "not_found" and not result.hits
    assert result.message.startswith("No entry for code 'E55' in")


def test_a_designation_no_manual_prints_names_another_machine(index: ManualIndex) -> None:
    """`TW` is printed (the TW-40, the TW-90), `TW-55` nowhere: E02 is listed only for other machines."""
    result = index.query("TW-55 inverter E02")
    assert result.status == "not_found" and "No indexed manual is about TW-55" in result.message


def test_a_code_only_a_sibling_lists_is_reported_so_at_the_machine(index: ManualIndex) -> None:
    result = index.query("E07", scope=Scope(vendor="Brannock Drives Ltd.", model="TW-90"))
    assert "not in the Brannock Drives Ltd. TW-90 manuals" in result.message
    assert "Tidewell TW-40 Inverter Manual" in result.message
    assert result.hits[0].manual == "tidewell_tw40.pdf" and result.hits[0].applies_to_device is False


def test_the_named_manuals_own_page_printing_the_code_answers_before_a_siblings_entry(index: ManualIndex) -> None:
    result = index.query("what does E09 mean on the Tidewell TW-90")
    assert result.status == "ok"
    assert (result.hits[0].manual, result.hits[0].kind, result.hits[0].page) == ("tidewell_tw90.pdf", "page", 3)
    assert "not in the" not in result.message


def test_at_the_machine_its_own_page_printing_the_code_answers_before_a_siblings_entry(index: ManualIndex) -> None:
    result = index.query("E09", scope=Scope(vendor="Brannock Drives Ltd.", model="TW-90"))
    assert (result.hits[0].manual, result.hits[0].kind, result.hits[0].page) == ("tidewell_tw90.pdf", "page", 3)
    assert "not in the" not in result.message


@pytest.mark.parametrize(
    ("question", "scope"),
    [
        ("Tidewell TW-90 shows ERR98 after a firmware update", None),
        ("ERR98 after a firmware update", None),
        ("ERR98", Scope(vendor="Brannock Drives Ltd.", model="TW-90")),
    ],
)
def test_a_code_typed_with_letters_is_the_page_printing_it_not_another_makes_bare_number(
    index: ManualIndex, question: str, scope: Scope | None
) -> None:
    """The TW-90's firmware note prints `ERR98` (no table lists it); the OP-2's alarm `0098` is `98` with the
    letters dropped as a cue, another machine's alarm."""
    result = index.query(question, scope)
    assert result.status == "ok" and "0098" not in result.message
    assert (result.hits[0].manual, result.hits[0].kind, result.hits[0].page) == ("tidewell_tw90.pdf", "page", 3)


def test_a_number_the_named_manual_prints_after_a_cue_is_its_page_not_another_makes_alarm(index: ManualIndex) -> None:
    """`Warning code 97` in the TW-90's note, the OP-2's alarm `0097`: a German question on the English manual shares
    no other word with the note, and its page answers all the same."""
    result = index.query("Tidewell TW-90 Warnung 97, Lüfter läuft voll")
    assert result.status == "ok" and "0097" not in result.message
    assert (result.hits[0].manual, result.hits[0].kind, result.hits[0].page) == ("tidewell_tw90.pdf", "page", 3)


def test_a_bare_number_still_finds_the_alarm_printed_padded(index: ManualIndex) -> None:
    result = index.query("alarm 98")
    assert (result.hits[0].manual, result.hits[0].fault_code) == ("ostrava_op2.pdf", "0098")


def test_a_code_the_named_manual_lists_answers_without_a_note(index: ManualIndex) -> None:
    result = index.query("what does E07 mean on the TW-40")
    assert [(hit.manual, hit.fault_code) for hit in result.hits] == [("tidewell_tw40.pdf", "E07")]
    assert result.message == "" and result.hits[0].applies_to_device is None


@pytest.mark.parametrize(("printed", "code", "title"), [(row[0], row[1], row[2]) for row in MARKED_ROWS])
def test_a_code_printed_with_marks_in_its_cell_is_an_exact_entry(
    index: ManualIndex, printed: str, code: str, title: str
) -> None:
    for typed in (code, printed):
        result = index.query(typed)
        assert result.status == "ok", typed
        top = result.hits[0]
        assert (top.manual, top.kind, top.title, top.match) == ("quillon_qx5.pdf", "entry", title, "exact"), typed


def test_the_manual_tool_says_a_siblings_code_is_another_machines(index: ManualIndex) -> None:
    """What the answer is written from: not found for the machine named, saying which manual lists the code; no
    reference to another machine's steps."""
    registry = ToolRegistry([ManualSearchTool(index.path, {}, None)])
    try:
        obs = registry.call(
            "search_maintenance_manual_by_fault_code",
            {"query": "what does E07 mean on the Tidewell TW-90"},
            ToolContext(request_id="r1", run_id="run1", loop_step=1),
            "obs-1",
        )
    finally:
        registry.close()
    assert obs.status == "not_found"
    text = obs.content[0].text
    assert "not in the Tidewell TW-90 Inverter Manual" in text and "Tidewell TW-40 Inverter Manual" in text
    assert [item.kind for item in obs.content] == ["text"] and obs.confidence == 0.0
