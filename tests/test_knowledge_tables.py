"""Fault tables read as rows: one entry per printed row, its cause and remedy from their columns,
on ruled, unruled, scanned and Chinese tables, over page breaks; no entries from a table
without a code column."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from knowledge.codes import code_key
from knowledge.extract import extract_manual
from knowledge.ocr import ocr_available
from knowledge.tables import column_roles, fault_header
from tests.fixtures.hard_manuals import (
    PARAMETERS,
    HardManual,
    Sheet,
    contains,
    english_cover,
    make_chinese_table,
    make_scanned_table,
    make_table_over_page_break,
    make_unruled_over_page_break,
    save,
)


def _problems(manual: HardManual) -> list[str]:
    """Every way the extraction of `manual` differs from one entry per row as printed."""
    extraction = extract_manual(manual.path)
    records = {code_key(r.code): r for r in extraction.records}
    wanted = {code_key(code) for code in manual.entries}
    problems = []
    if missing := sorted(wanted - set(records)):
        problems.append(f"no entry for {missing}")
    if extra := sorted(set(records) - wanted):
        problems.append(f"entries that are no row: {[records[k].code for k in extra]}")
    for code, want in manual.entries.items():
        record = records.get(code_key(code))
        if record is None:
            continue
        remedy = " ".join(record.steps)
        fields = {"title": record.title, "cause": record.cause, "remedy": remedy}
        anywhere = " ".join(fields.values())
        for name, words in (("title", want.title), ("cause", want.cause), ("remedy", want.remedy)):
            if lacking := [w for w in words if not contains(fields[name], w)]:
                problems.append(f"{code}: {name} lacks {lacking}")
        if lacking := [w for w in want.anywhere if not contains(anywhere, w)]:
            problems.append(f"{code}: text lacks {lacking}")
        if tuple(record.pages) != want.pages:
            problems.append(f"{code}: on pages {record.pages}, printed on {list(want.pages)}")
    return problems


def _continued(manual: HardManual) -> list[str]:
    return [code for code, want in manual.entries.items() if len(want.pages) > 1]


def test_ruled_table_over_a_page_break(tmp_path: Path) -> None:
    manual = make_table_over_page_break(tmp_path)
    assert _continued(manual), "the fixture is to break a row over the page"
    assert not _problems(manual)


def test_unruled_table_over_a_page_break(tmp_path: Path) -> None:
    manual = make_unruled_over_page_break(tmp_path)
    assert _continued(manual), "the fixture is to break a row over the page"
    with pymupdf.open(manual.path) as doc:
        assert not any(page.get_drawings() for page in doc), "the fixture is to have no ruling lines"
        assert doc[1].search_for("Remedy"), "the fixture is to repeat the header on page 2"
    assert not _problems(manual)


def test_scanned_ruled_table_is_read_cell_by_cell(tmp_path: Path) -> None:
    assert ocr_available(), "tesseract with eng and chi_sim is needed"
    manual = make_scanned_table(tmp_path)
    with pymupdf.open(manual.path) as doc:
        assert not doc[1].get_text().strip(), "the fixture is to have no text layer on the scan"
    assert not _problems(manual)
    extraction = extract_manual(manual.path)
    assert extraction.info.ocr_pages == [2]
    assert all(record.page == 2 for record in extraction.records)


def test_chinese_table(tmp_path: Path) -> None:
    assert not _problems(make_chinese_table(tmp_path))


@pytest.mark.parametrize("ruled", [True, False])
def test_a_parameter_table_gives_no_entries(tmp_path: Path, ruled: bool) -> None:
    """A parameter list under a heading that says "fault": its numbers are no fault codes."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, "Drive Fault Handling Parameters", "Example Drives", "XD-5")
    sheet.heading("7 Fault handling parameters")
    sheet.paragraph("These parameters set how the drive reacts to a fault and an alarm.")
    sheet.table((50, 200, 130, 115), ("No.", "Name", "Setting range", "Default"), PARAMETERS, ruled=ruled)
    path = save(doc, tmp_path / "parameters.pdf", "Drive Fault Handling Parameters", "written for the fixloop tests")
    extraction = extract_manual(path)
    assert [r.code for r in extraction.records] == []


def test_header_words_name_the_columns() -> None:
    assert column_roles(["故障代码", "故障名称", "故障原因", "处理方法"]) == {
        0: "code",
        1: "title",
        2: "cause",
        3: "remedy",
    }
    assert column_roles(["Error code", "Possible defect"]) == {0: "code", 1: "cause"}
    assert column_roles(["Code", "Fault", "Description"]) == {0: "code", 1: "title", 2: "cause"}
    assert fault_header(["Alarm No.", "Name", "Countermeasure"])
    assert not fault_header(["No.", "Name", "Setting range", "Default"][1:])
