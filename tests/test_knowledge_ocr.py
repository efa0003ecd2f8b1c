"""OCR of scanned pages with the real Tesseract, on PDFs made here: a page of text rendered
to an image and placed as the page's only content is a "scanned" page."""

from collections.abc import Callable
from pathlib import Path

import pymupdf
import pytest

from knowledge.ingest import ocr
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.ocr import (
    LANGUAGES,
    OUTLINES,
    SCANNED,
    UNUSABLE,
    OcrError,
    languages_for,
    ocr_available,
    ocr_pages,
    shows_images,
    unread_layer,
)

FAULT_TABLE = [
    (72, "Fault codes of the HP-200 press"),
    (110, "E102   Motor over-temperature"),
    (134, "E205   Hydraulic pressure too low"),
    (158, "F03    Encoder signal lost"),
    (196, "Stop the press and let the motor cool down before you reset the alarm."),
]
ENGLISH = (
    "If the hydraulic oil is too hot, the press stops and shows fault E103. Check the oil level "
    "and the cooler fan, clean the filter, and let the oil cool before you restart the pump."
)
CHINESE = "液压油温度过高时，压力机停机并显示故障E103。请检查油位和冷却风扇，清洗滤网，待油温下降后再启动油泵。"


def text_page(doc: pymupdf.Document, write: Callable[[pymupdf.Page], None]) -> pymupdf.Page:
    page = doc.new_page(width=500, height=300)
    write(page)
    return page


def scanned(tmp_path: Path, write: Callable[[pymupdf.Page], None], dpi: int = 200) -> Path:
    """A one-page PDF whose only content is an image of the page `write` draws, scanned at `dpi`."""
    pixmap = text_page(pymupdf.open(), write).get_pixmap(dpi=dpi)
    doc = pymupdf.open()
    page = doc.new_page(width=500, height=300)
    page.insert_image(page.rect, pixmap=pixmap)
    path = tmp_path / "scan.pdf"
    doc.save(path)
    return path


def fault_table(page: pymupdf.Page) -> None:
    for y, line in FAULT_TABLE:
        page.insert_text((40, y), line, fontsize=12)


def test_a_scanned_fault_table_is_read_with_words_codes_and_boxes(tmp_path):
    path = scanned(tmp_path, fault_table)
    result = ocr_pages(path, [1]).pages[1]
    assert "E102" in result.text and "Motor over-temperature" in result.text
    assert "E205" in result.text and "Encoder signal lost" in result.text
    assert result.confidence > 0.5
    page = pymupdf.Rect(0, 0, 500, 300)
    assert all(pymupdf.Rect(box) in page for _, box in result.lines)
    # Boxes are in PDF points: the E102 line sits where it was written (baseline 110, 12 pt type).
    (box,) = [box for text, box in result.lines if "E102" in text]
    assert 35 <= box[0] <= 50 and 95 <= box[1] <= 112 and 100 <= box[3] <= 116


def test_paragraphs_are_kept_and_lines_split(tmp_path):
    text = ocr_pages(scanned(tmp_path, fault_table), [1], languages="eng").pages[1].text
    assert "Motor over-temperature\n" in text
    assert "\n\n" in text


def test_a_scanned_chinese_line_keeps_its_words_and_codes_whole(tmp_path):
    path = scanned(
        tmp_path,
        lambda page: page.insert_text(
            (40, 100), "故障代码 E102 过压保护，检查输入电压", fontname="china-s", fontsize=12
        ),
    )
    text = ocr_pages(path, [1]).pages[1].text
    assert "过压保护" in text and "输入电压" in text
    assert "E102" in text  # Tesseract's Chinese model reads it as "E 10 2"


def test_a_scan_of_low_resolution_is_read_smoothed_not_in_blocks(tmp_path):
    # At 75 dpi a Chinese character is ~11 pixels; enlarged to 300 dpi by repeating pixels, Tesseract read
    # 2% of this text's characters (Latin debris), smoothed 0.75.
    path = scanned(
        tmp_path,
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 260), CHINESE, fontname="china-s", fontsize=9),
        dpi=75,
    )
    assert ocr.scan_dpi(pymupdf.open(path)[0]) == pytest.approx(75, abs=1)
    text = ocr_pages(path, [1], quick_dpi=None).pages[1].text
    assert "液压油温度过高时" in text and "压力机停机并显示故障" in text


def test_latin_debris_in_a_chinese_line_is_read_again_as_chinese(tmp_path):
    # Read in English and Chinese, 清洗滤网 of this 79-dpi scan came out as one unsure word, 'RARER'.
    text = CHINESE + "主轴过载报警后请降低切削量并检查润滑系统。"
    path = scanned(
        tmp_path,
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 260), text, fontname="china-s", fontsize=9),
        dpi=79,
    )
    read = ocr_pages(path, [1], quick_dpi=None).pages[1].text
    assert "清洗滤网" in read and "RARER" not in read
    assert "E103" in read.replace(" ", "")  # a code is no debris: it keeps its letters


def test_two_printed_pages_scanned_side_by_side_are_read_a_side_at_a_time(tmp_path):
    # Read whole, Tesseract joined each Chinese line of the left page to the right page's across this gutter
    # of 10 points: '请检查油位一次润滑脂'.
    left = [
        "压力机停机并显示故障E103时，",
        "液压油温度过高。请检查油位",
        "和冷却风扇，清洗滤网，待油",
        "温下降后再启动油泵。",
    ]
    right = [
        "主轴轴承每运行500小时加注",
        "一次润滑脂，润滑脂型号见备件",
        "清单。冷却液过滤器两端压差",
        "超过0.8巴时请更换过滤器。",
    ]
    width = max(pymupdf.get_text_length(line, fontname="china-s", fontsize=12) for line in left)

    def spread(page: pymupdf.Page) -> None:
        for n, (a, b) in enumerate(zip(left, right)):
            page.insert_text((250 - 5 - width, 80 + 22 * n), a, fontname="china-s", fontsize=12)
            page.insert_text((250 + 5, 80 + 22 * n), b, fontname="china-s", fontsize=12)

    read = ocr_pages(scanned(tmp_path, spread, dpi=150), [1], quick_dpi=None).pages[1]
    assert "请检查油位" in read.text and "一次润滑脂" in read.text
    assert all(box[2] <= 250 or box[0] >= 250 for _, box in read.lines)


def test_pages_come_back_by_number_and_a_missing_page_is_named(tmp_path):
    path = scanned(tmp_path, fault_table)
    assert list(ocr_pages(path, [1, 1], languages="eng").pages) == [1]
    with pytest.raises(OcrError, match="no page 2"):
        ocr_pages(path, [2])


def test_an_image_only_page_needs_ocr(tmp_path):
    page = pymupdf.open(scanned(tmp_path, fault_table))[0]
    assert page.get_text().strip() == "" and shows_images(page)
    assert unread_layer(page, page.get_text()) == SCANNED


@pytest.mark.parametrize(
    "write",
    [
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 200), ENGLISH, fontsize=11),
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 200), CHINESE, fontname="china-s", fontsize=11),
    ],
)
def test_a_text_page_with_a_figure_needs_no_ocr(tmp_path, write):
    page = text_page(pymupdf.open(), write)
    figure = text_page(pymupdf.open(), fault_table).get_pixmap(dpi=72)
    page.insert_image(pymupdf.Rect(250, 200, 450, 290), pixmap=figure)
    assert shows_images(page)
    assert unread_layer(page, page.get_text()) is None


def test_a_garbage_text_layer_over_an_image_needs_ocr(tmp_path):
    # An old OCR layer over a drawing: rules read as punctuation, strokes as stray letters.
    debris = "_.. ._ -- -.- : I i 1 .-- _- ;- `~ 'l ~ ^ _.-- ,I __ -'\n" * 12
    page = text_page(pymupdf.open(), lambda page: page.insert_textbox(page.rect, debris, fontsize=10))
    page.insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=text_page(pymupdf.open(), fault_table).get_pixmap(dpi=72))
    assert unread_layer(page, page.get_text()) == SCANNED
    # Glyphs without a Unicode mapping: private-use code points, or U+FFFD.
    assert unread_layer(page, "\ue021\ue034\ue011 \ue052\ue00f" * 40) == SCANNED
    assert unread_layer(page, "\ufffd\ufffd\ufffd \ufffd\ufffd" * 40) == SCANNED


def test_a_header_logo_is_not_an_image_worth_reading():
    page = text_page(pymupdf.open(), lambda page: page.insert_text((40, 20), "HP-200 Service Manual", fontsize=9))
    logo = text_page(pymupdf.open(), fault_table).get_pixmap(dpi=10)
    page.insert_image(pymupdf.Rect(440, 8, 480, 18), pixmap=logo)
    assert not shows_images(page)


def test_languages_follow_the_text_layer_of_the_manual():
    assert languages_for(ENGLISH * 3) == "eng"
    assert "chi_sim" in languages_for(ENGLISH + CHINESE)
    assert languages_for("") == LANGUAGES  # a manual scanned throughout: nothing to judge by


def test_missing_tesseract_data_is_a_clear_error(tmp_path, monkeypatch):
    path = scanned(tmp_path, fault_table)
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))  # as on a box without the Debian packages
    assert not ocr_available()
    with pytest.raises(OcrError, match=r"no tesseract data for eng, chi_sim in .*tesseract-ocr tesseract-ocr-chi-sim"):
        ocr_pages(path, [1])
    (tmp_path / "eng.traineddata").write_bytes(b"not a model")
    with pytest.raises(OcrError, match=r"tesseract cannot load eng from .*tesseract-ocr tesseract-ocr-chi-sim"):
        ocr_pages(path, [1], languages="eng")


def test_the_debian_traineddata_are_found_without_configuration(monkeypatch):
    monkeypatch.delenv("TESSDATA_PREFIX", raising=False)
    assert ocr.tessdata() is not None and (ocr.tessdata() / "chi_sim.traineddata").is_file()


def test_a_page_tesseract_gives_up_on_twice_is_left_unread_and_named(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "PAGE_TIMEOUT_S", 0.001)  # 1 ms
    run = ocr_pages(scanned(tmp_path, fault_table), [1], languages="eng")
    assert run.pages == {}
    assert run.unread == {1: "page 1: tesseract took longer than 0.001 s (read twice)"}


def test_one_slow_page_loses_only_its_own_text(tmp_path, monkeypatch):
    """Under load one page may exceed PAGE_TIMEOUT_S: the manual keeps the OCR of its other pages, and the
    build names the page left without text. A page of dense small print takes Tesseract 10 s and more, a
    short fault table well under 1 s; the limit sits between them."""
    table = text_page(pymupdf.open(), fault_table).get_pixmap(dpi=200)
    dense = pymupdf.open()
    # As dense as print gets (3.5 pt at 400 dpi): 25 s of Tesseract on one idle core, where 4.5 pt at 300 dpi took 4 s
    # and, on a quiet box with both cores, came in under the limit.
    dense.new_page(width=595, height=842).insert_textbox(pymupdf.Rect(20, 20, 575, 822), ENGLISH * 150, fontsize=3.5)
    doc = pymupdf.open()
    doc.new_page(width=500, height=300).insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=table)
    doc.new_page(width=595, height=842).insert_image(
        pymupdf.Rect(0, 0, 595, 842), pixmap=dense[0].get_pixmap(dpi=400, colorspace=pymupdf.csGRAY)
    )
    doc.save(tmp_path / "press.pdf")
    monkeypatch.setattr(ocr, "PAGE_TIMEOUT_S", 2.5)
    extraction = extract_manual(tmp_path / "press.pdf")
    assert extraction.info.ocr_pages == [1] and extraction.info.scanned_pages == [2]
    assert any("E102" in passage.text for passage in extraction.passages)
    assert extraction.warnings == [
        "press.pdf: page 2: tesseract took longer than 2.5 s (read twice); the page is left without text"
    ]


def outlined_page(tmp_path: Path, write: Callable[[pymupdf.Page], None]) -> Path:
    """A one-page PDF whose lettering is drawn as filled paths, as a design tool exports it: no text layer."""
    svg = text_page(pymupdf.open(), write).get_svg_image(text_as_path=True)
    path = tmp_path / "outlined.pdf"
    pymupdf.open("pdf", pymupdf.open("svg", svg.encode()).convert_to_pdf()).save(path)
    return path


def test_a_page_of_outlined_lettering_is_read_by_ocr(tmp_path):
    path = outlined_page(tmp_path, fault_table)
    page = pymupdf.open(path)[0]
    assert page.get_text().strip() == "" and not shows_images(page)
    assert unread_layer(page, "") == OUTLINES
    extraction = extract_manual(path)
    assert extraction.info.ocr_pages == [1] and extraction.outline_pages == [1] and extraction.info.scanned_pages == []
    assert any("Encoder signal lost" in passage.text for passage in extraction.passages)


def test_a_layer_of_unmapped_glyphs_without_images_is_read_by_ocr(tmp_path):
    """A font whose ToUnicode map sends its glyphs to private-use code points: legible on paper, no words in
    the layer, and no image on the page."""
    doc = pymupdf.open()
    text_page(doc, fault_table)
    cmap = (
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap "
        "/CIDSystemInfo << /Registry (Adobe) /Ordering (UCS) /Supplement 0 >> def "
        "/CMapName /Private def /CMapType 2 def 1 begincodespacerange <00> <FF> endcodespacerange "
        "1 beginbfrange <20> <7E> <E020> endbfrange endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    stream = doc.get_new_xref()
    doc.update_object(stream, "<<>>")
    doc.update_stream(stream, cmap.encode())
    (font,) = doc[0].get_fonts()
    doc.xref_set_key(font[0], "ToUnicode", f"{stream} 0 R")
    doc.save(tmp_path / "unmapped.pdf")
    page = pymupdf.open(tmp_path / "unmapped.pdf")[0]
    assert "E102" not in page.get_text() and unread_layer(page, page.get_text()) == UNUSABLE
    extraction = extract_manual(tmp_path / "unmapped.pdf")
    assert extraction.info.ocr_pages == [1] and extraction.outline_pages == [1]
    assert any("Motor over-temperature" in passage.text for passage in extraction.passages)


def test_a_drawing_without_lettering_and_a_blank_page_need_no_ocr():
    drawing = pymupdf.open().new_page(width=500, height=300)
    for x in range(40, 460, 20):  # a dimensioned part: stroked lines and a few filled arrowheads
        drawing.draw_line((x, 60), (x + 15, 240))
    for x in range(40, 460, 60):
        drawing.draw_polyline([(x, 250), (x + 6, 253), (x, 256), (x, 250)], fill=(0, 0, 0))
    drawing.insert_text((40, 280), "Fig. 3", fontsize=9)
    assert unread_layer(drawing, drawing.get_text()) is None
    assert unread_layer(pymupdf.open().new_page(width=500, height=300), "") is None


def test_ocr_is_installed():
    # `make test` installs Debian's tesseract-ocr with the English and Chinese data; indexing needs both.
    assert ocr_available()


def test_a_page_scanned_upside_down_is_read(tmp_path):
    # The quick read (no orientation detection) is unsure of what it reads; the careful one turns the page.
    pixmap = text_page(pymupdf.open(), fault_table).get_pixmap(dpi=200)
    doc = pymupdf.open()
    doc.new_page(width=500, height=300).insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=pixmap, rotate=180)
    doc.save(tmp_path / "upside-down.pdf")
    text = ocr_pages(tmp_path / "upside-down.pdf", [1]).pages[1].text
    assert "E102" in text and "Motor over-temperature" in text and "Encoder signal lost" in text


def test_an_english_page_is_read_once_quickly_and_a_chinese_page_again_in_both_languages(tmp_path, monkeypatch):
    reads = []
    read = ocr._read
    monkeypatch.setattr(
        ocr, "_read", lambda png, number, how, to_points: reads.append(how) or read(png, number, how, to_points)
    )
    ocr_pages(scanned(tmp_path, fault_table), [1])
    assert reads == [(ocr.QUICK_LANGUAGE, ocr.QUICK_SEGMENTATION, ocr.QUICK_DPI)]
    reads.clear()
    chinese = scanned(
        tmp_path,
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 200), CHINESE, fontname="china-s", fontsize=11),
    )
    assert "冷却风扇" in ocr_pages(chinese, [1]).pages[1].text
    assert reads == [
        (ocr.QUICK_LANGUAGE, ocr.QUICK_SEGMENTATION, ocr.QUICK_DPI),
        (LANGUAGES, ocr.PAGE_SEGMENTATION, 300),
    ]
    reads.clear()
    ocr_pages(scanned(tmp_path, fault_table), [1], quick_dpi=None)  # always the careful read
    assert reads == [(LANGUAGES, ocr.PAGE_SEGMENTATION, 300)]


def test_the_scans_of_a_manual_with_a_chinese_text_layer_are_read_carefully_at_once(tmp_path, monkeypatch):
    """Its scans are Chinese too: a quick English read would be unsure of them and read each page twice."""
    assert ocr.quick_dpi_for(CHINESE) is None
    assert ocr.quick_dpi_for(ENGLISH) == ocr.quick_dpi_for("") == ocr.QUICK_DPI
    pixmap = text_page(
        pymupdf.open(),
        lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 200), CHINESE, fontname="china-s", fontsize=11),
    ).get_pixmap(dpi=200)
    doc = pymupdf.open()
    text_page(doc, lambda page: page.insert_textbox(pymupdf.Rect(40, 40, 460, 260), CHINESE * 3, fontname="china-s"))
    doc.new_page(width=500, height=300).insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=pixmap)
    doc.save(tmp_path / "chinese.pdf")
    reads = []
    read = ocr._read
    monkeypatch.setattr(
        ocr, "_read", lambda png, number, how, to_points: reads.append(how) or read(png, number, how, to_points)
    )
    extraction = extract_manual(tmp_path / "chinese.pdf")
    assert extraction.info.ocr_pages == [2]
    assert reads == [(LANGUAGES, ocr.PAGE_SEGMENTATION, 300)]
