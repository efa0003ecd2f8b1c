"""Fault tables read as rows: one entry per printed row, its cause and remedy from their columns,
on ruled, unruled, scanned and Chinese tables, over page breaks; no entries from a table
without a code column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pymupdf
import pytest

from knowledge.codes import code_key
from knowledge.ingest import tables
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.ocr import ocr_available
from knowledge.ingest.tables import column_roles, fault_header, row_of
from tests.fixtures.hard_manuals import (
    A4,
    PARAMETERS,
    HardManual,
    Pen,
    Sheet,
    contains,
    english_cover,
    make_chinese_table,
    make_parts_list_beside_faults,
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


def _codes_of_one_table(
    folder: Path, title: str, heading: str, table: tuple, paragraph: str = "", ruled: bool = True
) -> list[str]:
    """The codes extracted from a manual of one table (`table`: widths, header, rows) under `heading`."""
    doc = pymupdf.open()
    sheet = Sheet(doc)
    english_cover(sheet, title, "Example Drives", "XD-5")
    sheet.heading(heading)
    if paragraph:
        sheet.paragraph(paragraph)
    sheet.table(*table, ruled=ruled)
    path = save(doc, folder / "manual.pdf", title, "written for the fixloop tests")
    return [r.code for r in extract_manual(path).records]


_UNHEADED_ROWS = (
    ("E01", "Wrong phase sequence", "Two supply phases swapped at the terminal block"),
    ("E03", "Water flow switch open", "Circulating pump stopped or the strainer blocked"),
    ("E05", "High pressure switch open", "Too much refrigerant or the fan does not turn"),
)


@pytest.mark.parametrize(
    ("heading", "header"),
    [
        # No word of the heading says faults: the table's own header does (a code column beside its causes).
        ("9 Service information", ("Error code", "Description", "Failure causes")),
        ("9 Trouble Analysis", ("Code", "Description", "Check")),
    ],
)
def test_a_fault_table_under_a_heading_that_says_no_fault_word_is_read(
    tmp_path: Path, heading: str, header: tuple[str, ...]
) -> None:
    table = ((60, 170, 265), header, _UNHEADED_ROWS)
    codes = _codes_of_one_table(tmp_path, "Heat Pump User Manual", heading, table)
    assert codes == ["E01", "E03", "E05"]


@pytest.mark.parametrize("ruled", [True, False])
def test_a_parameter_table_gives_no_entries(tmp_path: Path, ruled: bool) -> None:
    """A parameter list under a heading that says "fault": its numbers are no fault codes."""
    table = ((50, 200, 130, 115), ("No.", "Name", "Setting range", "Default"), PARAMETERS)
    paragraph = "These parameters set how the drive reacts to a fault and an alarm."
    codes = _codes_of_one_table(
        tmp_path, "Drive Fault Handling Parameters", "7 Fault handling parameters", table, paragraph, ruled
    )
    assert codes == []


@pytest.mark.parametrize("numbered", ["Pin No.", "Part No.", "LED No."])
def test_a_list_of_numbered_things_gives_no_entries(tmp_path: Path, numbered: str) -> None:
    """A connector's pins, spare parts or LEDs listed in the troubleshooting chapter: numbered, named,
    explained, but neither causes nor remedies."""
    rows = [("1", "AL1", "Alarm output bit one"), ("2", "AL2", "Alarm output bit two"), ("13", "ALM", "Common alarm")]
    table = ((70, 90, 300), (numbered, "Symbol", "Description"), rows)
    paragraph = "Check the alarm connector first; its pins carry the alarm outputs listed below."
    assert (
        _codes_of_one_table(tmp_path, "Spindle Drive Maintenance Manual", "9 Troubleshooting", table, paragraph) == []
    )


@pytest.mark.parametrize(
    ("header", "scanned"),
    [
        (("No.", "Name"), False),
        (("Nr.", "Bezeichnung"), False),
        (("No.", "Name", "Description"), False),  # what a part is, not what a fault means
        (("Part No.", "Name", "Description"), False),
        (("No.", "Name"), True),
    ],
)
def test_a_parts_list_numbered_by_its_rows_beside_a_fault_table_gives_no_entries(
    tmp_path: Path, header: tuple[str, ...], scanned: bool
) -> None:
    """A parts list in the troubleshooting chapter, keyed by a bare running number (`No.`, which also heads
    fault tables' code columns) with nothing said of causes or remedies: its bracket numbered 9 is no alarm 9."""
    if scanned:
        assert ocr_available(), "tesseract with eng and chi_sim is needed"
    assert _problems(make_parts_list_beside_faults(tmp_path, header, scanned)) == []


@pytest.mark.parametrize("ruled", [True, False])
def test_a_fault_table_numbered_by_its_rows_is_keyed_by_its_code_column(tmp_path: Path, ruled: bool) -> None:
    """`No. | Error code | Name | Cause | Remedy`: `No.` heads code columns too, but here it numbers the rows."""
    rows = [(str(n), code, title, cause, remedy) for n, (code, title, cause, remedy) in enumerate(FAULT_ROWS, 1)]
    table = ((30, 55, 110, 160, 140), ("No.", "Error code", "Name", "Cause", "Remedy"), rows)
    assert _codes_of_one_table(tmp_path, "Press Service Manual", "6 Troubleshooting", table, ruled=ruled) == [
        row[0] for row in FAULT_ROWS
    ]


def test_a_sequence_chart_drawn_as_a_grid_gives_no_entries(tmp_path: Path) -> None:
    """A burner control's sequence chart, ruled like a table under its lockout heading: the same LED labels
    head every column (one of them `ALARM`) and the interlocks it shows read like mnemonic codes."""
    leds = "POWER\nPILOT\nFLAME\nMAIN\nALARM"
    rows = [
        ("STANDBY", "PREPURGE", "LOCKOUT", "INTERLOCKS", "CLOSED"),
        ("", "SAFE", "START CHECK", "FLAME", "PROVING"),
        ("IGNITION", "", "CLOSED", "PREIGNITION", "INTERLOCK"),
    ]
    table = ((70, 70, 90, 90, 90), ("POWER", "POWER", leds, leds, "POWER"), rows)
    assert (
        _codes_of_one_table(tmp_path, "Relay Module Installation Instructions", "5 Alarm and lockout sequence", table)
        == []
    )


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
    # A column that numbers the rows is the code column only where no other is named so.
    assert column_roles(["No.", "Error code", "Cause", "Remedy"]) == {1: "code", 2: "cause", 3: "remedy"}
    assert column_roles(["No. {", "Fault code", "Name", "Cause"]) == {1: "code", 2: "title", 3: "cause"}
    assert column_roles(["No.", "Name", "Cause", "Remedy"])[0] == "code"
    assert not fault_header(["No.", "Name", "Setting range", "Default"][1:])


def test_a_column_word_is_said_as_a_word() -> None:
    # `display` runs on into "Where Displayed" (a place, not the message): the meaning is the explanation.
    assert column_roles(["Displayed Message", "Type", "Where Displayed", "Meaning"]) == {0: "title", 3: "cause"}
    assert column_roles(["Problem", "Display Message", "Possible Causes", "Corrective Measures"]) == {
        0: "symptom",
        1: "title",
        2: "cause",
        3: "remedy",
    }
    assert column_roles(["ErrorCode", "Descriptions"]) == {0: "code", 1: "title"}


_LISTED = [
    ("21", "Flame loss", ["Flame signal lost during", "operation"], ["Check the flame detector", "and its cable"]),
    ("3A", "Air pressure", ["Air pressure switch does", "not close during prepurge"], ["Check the fan and its hose"]),
    ("4C", "Low gas", ["Gas pressure below the", "minimum switch setting"], ["Open the gas valve"]),
]


def _error_list() -> pymupdf.Document:
    """A landscape error list as a burner control's manual prints it: hex codes, a header over two rows
    (`Error` / `code`), thin rules between entries and a shaded box behind each printed line of a cell."""
    doc = pymupdf.open()
    page = doc.new_page(width=842, height=595)
    page.insert_text((40, 40), "5 List of error messages", fontsize=16)
    page.insert_text((40, 560), "Error messages are shown on the display with their code.", fontsize=9)
    xs, top, y = [40, 100, 240, 480, 800], 60, 60

    def entry(y: float, texts: list[list[str]], baseline: list[float]) -> None:
        page.draw_rect(pymupdf.Rect(xs[0], y, xs[-1], y + 0.5), color=None, fill=(0, 0, 0))
        for i in range(len(xs) - 1):
            for line in range(2):
                box = pymupdf.Rect(xs[i] + 1, y + 12 * line, xs[i + 1] - 1, y + 12 * (line + 1))
                page.draw_rect(box, color=None, fill=(0.93, 0.93, 0.93))
            for line, text in enumerate(texts[i]):
                page.insert_text((xs[i] + 3, y + baseline[i] + 12 * line), text, fontsize=9)

    entry(y, [["Error", "code"], ["Display"], ["Meaning"], ["Troubleshooting"]], [10, 10, 10, 10])
    for code, display, meaning, remedy in _LISTED:
        y += 24
        entry(y, [[code], [display], meaning, remedy], [16, 16, 10, 10])  # the code centred in its row
    y += 24
    page.draw_rect(pymupdf.Rect(xs[0], y, xs[-1], y + 0.5), color=None, fill=(0, 0, 0))
    for x in xs:
        page.draw_rect(pymupdf.Rect(x, top, x + 0.5, y), color=None, fill=(0, 0, 0))
    return doc


@pytest.mark.parametrize("stored", ["upright", "rotated"])
def test_an_error_list_with_hex_codes_a_two_row_header_and_shaded_lines(tmp_path: Path, stored: str) -> None:
    """Rows are the entries between the rules (not each shaded printed line), and a page stored upright
    with a /Rotate that shows it landscape reads as the landscape page does."""
    listing = _error_list()
    path = tmp_path / f"error_list_{stored}.pdf"
    if stored == "rotated":
        doc = pymupdf.open()
        page = doc.new_page(width=595, height=842)
        page.show_pdf_page(page.rect, listing, 0, rotate=90)
        page.set_rotation(90)
        doc.save(path)
    else:
        listing.save(path)
    records = extract_manual(path, ocr=False).records
    assert [(r.code, r.title, r.cause, r.steps) for r in records] == [
        (code, display, " ".join(meaning), [" ".join(remedy)]) for code, display, meaning, remedy in _LISTED
    ]


def test_a_row_that_mentions_a_parameter_number_is_no_header(tmp_path: Path) -> None:
    """On a continuation page a row whose description says `NO.027` (as a header says `Alarm No.`) is still
    a row of the table the first page's header named."""
    doc = pymupdf.open()
    xs = [50, 110, 330, 545]
    rows = [("Alarm No.", "Content", "Remedy")] + [
        (f"00{n:02d}", f"Feed rate exceeds parameter NO.0{n}", f"Correct the program, block {n}") for n in range(20, 32)
    ]
    for page_rows in (rows[:7], rows[7:]):
        page = doc.new_page()
        if page.number == 0:
            page.insert_text((50, 50), "3 Alarm list", fontsize=16)
            page.insert_text((50, 62), "The alarm number is shown on the screen.", fontsize=9)
        y = 70
        for row in page_rows:
            page.draw_line((xs[0], y), (xs[-1], y))
            for x, text in zip(xs, row, strict=False):
                page.insert_text((x + 3, y + 14), text, fontsize=9)
            y += 20
        page.draw_line((xs[0], y), (xs[-1], y))
        for x in xs:
            page.draw_line((x, 70), (x, y))
    doc.save(tmp_path / "alarm_list.pdf")
    records = extract_manual(tmp_path / "alarm_list.pdf", ocr=False).records
    assert [r.code for r in records] == [row[0] for row in rows[1:]]
    assert all(r.cause.startswith("Feed rate") and r.steps for r in records)


def test_a_scanned_cell_split_inside_a_row_belongs_to_that_row() -> None:
    """A rule across one column only can start a cell inside a row of the grid, its last row too (seen on
    a scanned softener manual, where it stopped the manual's indexing with an IndexError)."""
    ys = [952.0, 971.0, 1039.0, 1187.0, 1262.0]
    assert [row_of(ys, top) for top in (952.0, 975.0, 1037.0, 1100.0, 1216.0)] == [0, 1, 2, 2, 3]


def test_a_manual_that_is_a_chinese_table_is_chinese(tmp_path: Path) -> None:
    """A fault list printed as one table under a Latin heading: its language is the table's, not that of
    the few words left beside it once the table is read."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((50, 50), "GSK980MDi Alarm List V2.0", fontsize=16)
    xs = [50, 110, 330, 545]
    rows = [("报警号", "报警内容", "报警解除")] + [
        (f"03{n:02d}", f"第{n}号轴的伺服驱动器报警", "检查伺服驱动器的电源和连接线") for n in range(10, 22)
    ]
    y = 70
    for row in rows:
        page.draw_line((xs[0], y), (xs[-1], y))
        for x, text in zip(xs, row, strict=False):
            page.insert_text((x + 3, y + 14), text, fontsize=9, fontname="china-s")
        y += 20
    page.draw_line((xs[0], y), (xs[-1], y))
    for x in xs:
        page.draw_line((x, 70), (x, y))
    doc.save(tmp_path / "alarm_list_zh.pdf")
    extraction = extract_manual(tmp_path / "alarm_list_zh.pdf", ocr=False)
    assert len(extraction.records) == 12 and extraction.info.language == "zh"


def test_a_scanned_grid_that_cannot_be_a_fault_table_is_not_read_cell_by_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parts list on the scanned page of a fault section: the page's OCR shows it has no code column,
    so its cells are not OCR'd one by one (the fault table beside it is)."""
    assert ocr_available(), "tesseract with eng and chi_sim is needed"
    paper = pymupdf.open()
    sheet = Sheet(paper, Pen(size=9))
    sheet.heading("6 Troubleshooting")
    sheet.table((45, 130, 170, 150), ("Code", "Name", "Cause", "Remedy"), FAULT_ROWS)
    sheet.paragraph("Spare parts for the repairs above:")
    sheet.table((160, 160, 160), ("Part", "Material", "Finish"), PART_ROWS)
    scan = paper[0].get_pixmap(dpi=200, colorspace=pymupdf.csGRAY)
    doc = pymupdf.open()
    english_cover(Sheet(doc), "Press Service Sheet", "Example Presses", "HP-200")
    doc.new_page().insert_image(A4, pixmap=scan)
    path = save(doc, tmp_path / "scanned_parts.pdf", "Press Service Sheet", "written for the fixloop tests")
    grids: list[int] = []
    read_cells = tables.ocr_cells

    def counted(images: list[np.ndarray], languages: str, dpi: int) -> list[str]:
        grids.append(len(images))
        return read_cells(images, languages, dpi)

    monkeypatch.setattr(tables, "ocr_cells", counted)
    records = extract_manual(path).records
    assert [r.code for r in records] == [row[0] for row in FAULT_ROWS]
    assert len(grids) == 1 and grids[0] >= 4 * len(FAULT_ROWS)


FAULT_ROWS = (
    ("E11", "Motor overheating", "The cooling fan is blocked.", "Clean the fan and its filter."),
    ("E12", "Oil pressure low", "The oil level is below the mark.", "Top up the hydraulic oil."),
    ("E13", "Guard door open", "The door switch is not closed.", "Close the door and check the switch."),
)
PART_ROWS = (
    ("Cooling fan", "Plastic housing", "Black"),
    ("Oil filter", "Paper element", "White"),
    ("Door switch", "Steel body", "Painted"),
)


def test_the_page_ocr_of_a_grid_tells_whether_it_may_hold_faults() -> None:
    header = ["Code", "Name", "Cause"]
    assert tables._may_hold_faults([header, ["E1", "Fan", "Dust"]])
    # Codes in a column, headed by a word the page's OCR misread.
    assert tables._may_hold_faults([["C0de", "Narne"], ["E1", "Fan"], ["E2", "Oil"], ["", ""], ["", ""]])
    assert not tables._may_hold_faults([["Part", "Material"], ["Fan", "Plastic"], ["Filter", "Paper"]])
    assert not tables._may_hold_faults([header])  # one row: no table to read
