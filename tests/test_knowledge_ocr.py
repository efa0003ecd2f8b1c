"""OCR of scanned pages with the real Tesseract, on PDFs made here: a page of text rendered
to an image and placed as the page's only content is a "scanned" page."""

from collections.abc import Callable
from pathlib import Path

import pymupdf
import pytest

from knowledge.ingest import ocr
from knowledge.ingest.extract import extract_manual
from knowledge.ingest.ocr import LANGUAGES, OcrError, languages_for, needs_ocr, ocr_available, ocr_pages, shows_images

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


def scanned(tmp_path: Path, write: Callable[[pymupdf.Page], None]) -> Path:
    """A one-page PDF whose only content is an image of the page `write` draws."""
    pixmap = text_page(pymupdf.open(), write).get_pixmap(dpi=200)
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
    result = ocr_pages(path, [1])[1]
    assert "E102" in result.text and "Motor over-temperature" in result.text
    assert "E205" in result.text and "Encoder signal lost" in result.text
    assert result.confidence > 0.5
    page = pymupdf.Rect(0, 0, 500, 300)
    assert all(pymupdf.Rect(box) in page for _, box in result.lines)
    # Boxes are in PDF points: the E102 line sits where it was written (baseline 110, 12 pt type).
    (box,) = [box for text, box in result.lines if "E102" in text]
    assert 35 <= box[0] <= 50 and 95 <= box[1] <= 112 and 100 <= box[3] <= 116


def test_paragraphs_are_kept_and_lines_split(tmp_path):
    text = ocr_pages(scanned(tmp_path, fault_table), [1], languages="eng")[1].text
    assert "Motor over-temperature\n" in text
    assert "\n\n" in text


def test_a_scanned_chinese_line_keeps_its_words_and_codes_whole(tmp_path):
    path = scanned(
        tmp_path,
        lambda page: page.insert_text(
            (40, 100), "故障代码 E102 过压保护，检查输入电压", fontname="china-s", fontsize=12
        ),
    )
    text = ocr_pages(path, [1])[1].text
    assert "过压保护" in text and "输入电压" in text
    assert "E102" in text  # Tesseract's Chinese model reads it as "E 10 2"


def test_pages_come_back_by_number_and_a_missing_page_is_named(tmp_path):
    path = scanned(tmp_path, fault_table)
    assert list(ocr_pages(path, [1, 1], languages="eng")) == [1]
    with pytest.raises(OcrError, match="no page 2"):
        ocr_pages(path, [2])


def test_an_image_only_page_needs_ocr(tmp_path):
    page = pymupdf.open(scanned(tmp_path, fault_table))[0]
    assert page.get_text().strip() == "" and shows_images(page)
    assert needs_ocr(page.get_text(), shows_images(page))


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
    assert not needs_ocr(page.get_text(), shows_images(page))


def test_a_garbage_text_layer_over_an_image_needs_ocr(tmp_path):
    # An old OCR layer over a drawing: rules read as punctuation, strokes as stray letters.
    debris = "_.. ._ -- -.- : I i 1 .-- _- ;- `~ 'l ~ ^ _.-- ,I __ -'\n" * 12
    page = text_page(pymupdf.open(), lambda page: page.insert_textbox(page.rect, debris, fontsize=10))
    page.insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=text_page(pymupdf.open(), fault_table).get_pixmap(dpi=72))
    assert needs_ocr(page.get_text(), shows_images(page))
    # Glyphs without a Unicode mapping: private-use code points, or U+FFFD.
    assert needs_ocr("\ue021\ue034\ue011 \ue052\ue00f" * 40, True)
    assert needs_ocr("\ufffd\ufffd\ufffd \ufffd\ufffd" * 40, True)


def test_pages_without_images_never_need_ocr():
    assert not needs_ocr("", False)


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


def test_a_page_tesseract_gives_up_on_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(ocr, "PAGE_TIMEOUT_S", 0.001)  # 1 ms
    with pytest.raises(OcrError, match=r"scan.pdf: page 1: tesseract took longer than"):
        ocr_pages(scanned(tmp_path, fault_table), [1], languages="eng")


def test_ocr_is_installed():
    # `make test` installs Debian's tesseract-ocr with the English and Chinese data; indexing needs both.
    assert ocr_available()


def test_a_page_scanned_upside_down_is_read(tmp_path):
    # The quick read (no orientation detection) is unsure of what it reads; the careful one turns the page.
    pixmap = text_page(pymupdf.open(), fault_table).get_pixmap(dpi=200)
    doc = pymupdf.open()
    doc.new_page(width=500, height=300).insert_image(pymupdf.Rect(0, 0, 500, 300), pixmap=pixmap, rotate=180)
    doc.save(tmp_path / "upside-down.pdf")
    text = ocr_pages(tmp_path / "upside-down.pdf", [1])[1].text
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
    assert "冷却风扇" in ocr_pages(chinese, [1])[1].text
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
