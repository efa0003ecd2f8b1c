"""Fault lists on scanned pages: a display code alone on its line, what it means below it. OCR gives each line as a
block of one size and no bold, so the line alone and the code's shape tell the heading. The scanned page itself,
read by the real Tesseract, is `scanned_display_list` of tests/fixtures/hard_manuals.py; here the lines are given
as OCR gives them."""

from knowledge.ingest.pdf import Block, Page
from knowledge.ingest.records import assemble


def ocr_page(*lines: str) -> Page:
    """A page read by OCR: each line its own block, at the body size, none bold."""
    blocks = [
        Block(text=line, size=10.0, bold=False, bbox=(40.0, 20.0 * n, 400.0, 20.0 * n + 12))
        for n, line in enumerate(lines)
    ]
    return Page(number=4, blocks=blocks, text_blocks=list(lines), ocr=True)


def entries(page: Page) -> dict:
    return {record.code: record for record in assemble([page], 10.0, {page.number}).records}


def test_a_display_code_alone_on_an_ocr_line_heads_its_entry():
    found = entries(
        ocr_page(
            "3.显示屏说明",
            "L.BAT",
            "电池电压低于7.1V时一直显示，降到6.9V以下时自动关机，请充电。",
            "PEAK",
            "显示时为峰值模式，保持测得的最大值。",
            "O.L(OVER LOAD)",
            "测量值超过最大量程的105%时显示，请立即卸除负荷。",
            "E-02",
            "传感器信号超出范围时显示，请检查传感器连接线。",
        )
    )
    assert set(found) == {"L.BAT", "O.L", "E-02"}  # PEAK is a mode the display shows, no fault
    assert found["O.L"].title == "OVER LOAD"
    assert "充电" in found["L.BAT"].title + found["L.BAT"].cause
    assert "峰值" not in found["L.BAT"].title + found["L.BAT"].cause  # the list's next item ends the entry


def test_a_drawings_labels_alone_on_their_lines_head_no_entry():
    """A connector's labels and a menu's boxes OCR'd from a drawing: each over another label, a stray mark or a
    caption, nothing that says what it means."""
    assert entries(ocr_page("ENC2", "ENC3", "ENC4", "HOLD1", "x", "EE-SEL", "EE -| nt", "HOLD2", "4.2 显示菜单")) == {}


def test_on_a_text_page_the_font_tells_a_heading_not_a_line_alone():
    page = ocr_page("L.BAT", "电池电压低于7.1V时一直显示，降到6.9V以下时自动关机，请充电。")
    page.ocr = False
    assert entries(page) == {}
