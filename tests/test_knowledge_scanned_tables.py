"""Fault tables on scanned pages without ruling lines, found from where the OCR'd words sit; the real
Tesseract reads PDFs made here (a page drawn, rendered to an image, and placed as the page's only content)."""

from pathlib import Path

import pymupdf

from knowledge.codes import loose_key
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.scanned_tables import layout_tables, plausible_code, shape

# Display codes of letters and digits, as a drive's panel shows them; the first column numbers the rows.
ROWS = (
    ("1", "oL3", "Motor overload: the load stayed above 150% too long."),
    ("2", "PF03", "Input phase lost: check the supply fuses."),
    ("3", "EF1", "External fault input closed."),
    ("4", "oH1", "Heatsink too hot: clean the cooling fan."),
    ("5", "Uv2", "DC bus undervoltage while running."),
)


def scanned_table(tmp_path: Path, header: tuple[str, str, str] | None, rows=ROWS, dpi: int = 200) -> Path:
    """A manual whose second page is a scan (at `dpi`) of an unruled fault table: numbering, code, text."""
    paper = pymupdf.open()
    page = paper.new_page(width=595, height=420)
    page.insert_text((40, 50), "7 Troubleshooting", fontsize=16, fontname="hebo")
    y = 90
    if header:
        for x, cell in zip((40, 90, 170), header):
            page.insert_text((x, y), cell, fontsize=11, fontname="hebo")
        y += 28
    for number, code, text in rows:
        for x, cell in zip((40, 90, 170), (number, code, text)):
            page.insert_text((x, y), cell, fontsize=11)
        y += 26
    scan = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    doc = pymupdf.open()
    doc.new_page(width=595, height=420).insert_textbox(
        pymupdf.Rect(40, 40, 555, 380), "The fault table of the drive on the next page is a scan.", fontsize=11
    )
    doc.new_page(width=595, height=420).insert_image(pymupdf.Rect(0, 0, 595, 420), pixmap=scan)
    doc.save(tmp_path / "hx7.pdf")
    return tmp_path / "hx7.pdf"


def test_the_code_column_of_a_scanned_table_is_found_where_the_codes_are_not_in_the_first_column(tmp_path):
    extraction = extract_manual(scanned_table(tmp_path, ("No.", "Fault code", "Description")))
    assert extraction.info.ocr_pages == [2]
    # Tesseract reads the 0 of PF03 as an O, with a whitelist and at 600 dpi too: search's look-alike keys
    # (o/0) find it, and the entry says the code as read.
    entries = {loose_key(record.code): record for record in extraction.records}
    assert set(entries) == {loose_key(code) for _, code, _ in ROWS}
    assert "phase lost" in entries[loose_key("PF03")].title
    assert all(record.pages == [2] for record in extraction.records)


def test_the_codes_of_a_table_scanned_at_low_resolution_are_read_from_smoothed_cells(tmp_path):
    # At 72 dpi, read in blocks of repeated pixels, EF1 and Uv2 were no codes and oL3 was oLa.
    extraction = extract_manual(scanned_table(tmp_path, ("No.", "Fault code", "Description"), dpi=72))
    entries = {record.code: record.title for record in extraction.records}
    assert {"oL3", "EF1", "oH1", "Uv2"} <= set(entries)
    assert "undervoltage" in entries["Uv2"]


def test_a_column_of_codes_that_repeat_one_shape_needs_no_header(tmp_path):
    rows = [(n, code, text) for n, (_, code, text) in zip("123456", ROWS)] + [("6", "oC2", "Overcurrent at start.")]
    extraction = extract_manual(scanned_table(tmp_path, None, rows))
    assert {record.code for record in extraction.records} >= {"oL3", "EF1", "oH1", "oC2"}
    assert not {"1", "2", "3"} & {record.code for record in extraction.records}  # the numbering is no code


def test_a_code_is_a_display_token_and_a_sentence_is_none():
    assert all(plausible_code(code) for code in ("oL3", "PF03", "EF1", "GF", "E.OC", "Err02"))
    assert not any(plausible_code(text) for text in ("Motor overload", "The", "check the fuses", ""))
    assert shape("oL3") == shape("PF03") == "A9" and shape("E.OC") == "A.A"


def test_a_column_of_labels_with_nothing_beside_them_is_no_table():
    """A connector drawing's labels line up like codes of one shape; a fault table says something about each.
    The words are placed as OCR gives them, on a page that prints them (where their cells are read again)."""
    page = pymupdf.open().new_page(width=595, height=420)
    labels = []
    for label, y in zip(("ENC2", "ENC3", "ENC4", "HOLD1", "HOLD2"), range(270, 340, 13)):
        page.insert_text((500, y + 9), label, fontsize=10)
        page.insert_text((560, y + 9), "Encoder", fontsize=10)
        labels.append((label, (500.0, float(y), 500 + pymupdf.get_text_length(label, fontsize=10), y + 10.0)))
    assert layout_tables(page, labels) == []
    described = labels + [("Encoder", (560.0, y0, 595.0, y1)) for _, (_, y0, _, y1) in labels]
    assert [row[0] for row in layout_tables(page, described)[0].rows] == ["ENC2", "ENC3", "ENC4", "HOLD1", "HOLD2"]
