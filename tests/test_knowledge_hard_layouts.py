"""Extraction and search on manuals laid out the hard ways real vendor manuals are.

The PDFs and their ground truth come from tests/fixtures/hard_manuals.py, one per
layout. Each test collects every way its manual falls short before failing, so
one run shows all that a layout still gets wrong.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest

from knowledge.codes import code_key
from knowledge.embed import Embedder
from knowledge.ingest.build import build_index
from knowledge.ingest.extract import extract_manual
from knowledge.models import FaultRecord, Hit
from knowledge.search import ManualIndex
from tests.fixtures.hard_manuals import GENERATORS, ExpectedEntry, HardManual, contains

# The 2-up quick start keys its alarms by LED flashes, not by printed codes: only its search is checked.
EXTRACTED = [name for name in GENERATORS if name != "two_up"]


@pytest.fixture(scope="session")
def hard_index(
    hard_manuals: dict[str, HardManual], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], ManualIndex]:
    """The index of one layout's manual alone, built on first use; one embedding model for all."""
    folder = tmp_path_factory.mktemp("hard-indexes")
    embedder = Embedder()
    built: dict[str, ManualIndex] = {}

    def index(layout: str) -> ManualIndex:
        if layout not in built:
            db = folder / f"{layout}.db"
            build_index([hard_manuals[layout].path], db, embedder=embedder)
            built[layout] = ManualIndex(db, embedder=embedder)
        return built[layout]

    return index


@pytest.mark.parametrize("layout", EXTRACTED)
def test_fault_entries_are_extracted_as_printed(hard_manuals: dict[str, HardManual], layout: str) -> None:
    manual = hard_manuals[layout]
    extraction = extract_manual(manual.path)
    records = {code_key(r.code): r for r in extraction.records}
    problems = []
    wanted = {code_key(code) for code in manual.entries}
    if missing := sorted(wanted - set(records)):
        problems.append(f"not extracted: {missing}")
    if manual.complete and (extra := sorted(set(records) - wanted)):
        problems.append(f"not fault entries of this manual: {[records[k].code for k in extra]}")
    if wrong := sorted({code_key(c) for c in manual.not_codes} & set(records)):
        problems.append(f"parameter or LED names taken for codes: {wrong}")
    for code, want in manual.entries.items():
        if code_key(code) in records:
            problems.extend(f"{code}: {p}" for p in _entry_problems(records[code_key(code)], want))
    for record in extraction.records:
        if any(unicodedata.category(c) == "Co" for c in _text(record)):
            problems.append(f"{record.code!r}: private-use characters left undecoded")
    # Pages without a text layer are read by OCR, and only those.
    if extraction.info.ocr_pages != list(manual.scanned_pages):
        problems.append(f"read by OCR: pages {extraction.info.ocr_pages}, expected {list(manual.scanned_pages)}")
    assert not problems, f"{manual.path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("layout", list(GENERATORS))
def test_questions_find_the_page_that_answers_them(
    hard_manuals: dict[str, HardManual], hard_index: Callable[[str], ManualIndex], layout: str
) -> None:
    manual = hard_manuals[layout]
    index = hard_index(layout)
    problems = []
    for query in manual.queries:
        result = index.query(query.text, k=3)
        if not result.hits:
            problems.append(f"{query.text!r}: {result.status}: {result.message}")
            continue
        hit = result.hits[0]
        found = f"{query.text!r} → {hit.fault_code or '(page)'} on page {hit.page} of {hit.manual}"
        if (hit.manual, hit.page) != (manual.path.name, query.page):
            problems.append(f"{found}, expected page {query.page}")
        if query.code and code_key(hit.fault_code) != code_key(query.code):
            problems.append(f"{found}, expected code {query.code}")
        if absent := [w for w in query.words if not contains(_hit_text(hit), w)]:
            problems.append(f"{found}, without {absent}")
        if query.page in manual.scanned_pages and not hit.ocr:  # text read from an image says so
            problems.append(f"{found}, not marked as read by OCR")
    assert not problems, f"{manual.path.name}:\n" + "\n".join(problems)


def _entry_problems(record: FaultRecord, want: ExpectedEntry) -> list[str]:
    steps = "\n".join(record.steps)
    problems = []
    checks = [
        ("title", want.title, record.title, ""),
        ("cause", want.cause, record.cause, steps),
        ("remedy", want.remedy, steps, record.cause),
        ("text", want.anywhere, _text(record), ""),
    ]
    for field, words, home, elsewhere in checks:
        if absent := [w for w in words if not contains(home, w)]:
            problems.append(f"{field} lacks {absent}")
        if strays := [w for w in words if elsewhere and contains(elsewhere, w)]:
            problems.append(f"{field} words {strays} also in the {'remedy' if field == 'cause' else 'cause'}")
    if record.pages != list(want.pages) or record.page != want.pages[0]:
        problems.append(f"on pages {record.pages}, printed on {list(want.pages)}")
    if want.steps is not None and len(record.steps) != want.steps:
        problems.append(f"{len(record.steps)} remedy steps, printed as {want.steps}")
    return problems


def _text(record: FaultRecord) -> str:
    return "\n".join([record.code, record.title, record.symptom, record.cause, *record.steps])


def _hit_text(hit: Hit) -> str:
    return "\n".join([hit.title, hit.symptom, hit.cause, *hit.steps, hit.snippet])  # a page hit has a snippet


def test_a_code_ocr_may_have_misread_is_looked_for_on_the_scanned_pages(
    hard_index: Callable[[str], ManualIndex],
) -> None:
    """`04109` is in no row of the scanned service sheet, whose table prints 04101-04108 (as OCR read them): the
    scan cannot say the code is not its own, so its fault page answers, not a `not_found`."""
    result = hard_index("scanned").query("MMU-3 error 04109")
    assert result.status == "ok", result.message
    assert (result.hits[0].manual, result.hits[0].page, result.hits[0].ocr) == ("filament_changer.pdf", 2, True)
