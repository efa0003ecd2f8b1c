"""Manual metadata from the manual's own text, PDFs made here with PyMuPDF; sidecar files and overrides."""

from pathlib import Path

import pymupdf
import pytest

from knowledge.ingest.metadata import manual_info, merge_overrides, normalize_version, read_sidecar
from knowledge.ingest.pdf import ManualError, read_manual
from knowledge.models import ManualInfo

BODY = [
    "Connect the motor leads to the terminal block before applying power.",
    "The drive reports a fault with the red LED and stops the motor.",
    "Check the supply voltage and the motor wiring when the fault persists.",
]


def make_pdf(path: Path, pages: list[list[tuple[str, float]]], metadata: dict[str, str] | None = None) -> Path:
    """One text line per (text, font size), top to bottom, well apart so each is its own block."""
    doc = pymupdf.open()
    font = pymupdf.Font("cjk")
    for lines in pages:
        page = doc.new_page()
        page.insert_font(fontname="cjk", fontbuffer=font.buffer)
        y = 150.0
        for text, size in lines:
            y += size * 2.2
            page.insert_text((60, y), text, fontname="cjk", fontsize=size)
    doc.set_metadata(metadata or {})
    doc.save(path)
    doc.close()
    return path


def body_pages(model: str, count: int = 3) -> list[list[tuple[str, float]]]:
    return [[(f"The {model} drive: {line}", 10) for line in BODY] for _ in range(count)]


def info_of(path: Path, overrides: dict[str, str] | None = None) -> ManualInfo:
    return manual_info(path, "0" * 64, read_manual(path), overrides)


@pytest.fixture
def english_manual(tmp_path: Path) -> Path:
    cover = [
        ("QM420 Stepper Drive", 30),
        ("User Manual", 18),
        ("Document BX-2231-S5", 14),
        ("Rev 3.2, March 2021", 11),
    ]
    last = [("Copyright © 2021 Quillon Motion Inc. All rights reserved.", 9), *[(line, 10) for line in BODY]]
    return make_pdf(
        tmp_path / "qm420.pdf",
        [cover, *body_pages("QM420"), last],
        {"author": "12345", "title": "Microsoft Word - manual.doc", "producer": "Acme PDF Writer"},
    )


def test_an_unknown_vendor_and_model_come_from_the_cover_and_the_copyright_line(english_manual):
    info = info_of(english_manual)
    assert info.vendor == "Quillon Motion"
    assert info.model == "QM420"  # not the document number BX-2231-S5
    assert info.version == "V3.2"
    assert info.title == "QM420 Stepper Drive User Manual Document BX-2231-S5"  # the cover's large print
    assert info.language == "en"


def test_a_chinese_cover_names_the_company_and_the_model(tmp_path):
    cover = [
        ("伺服驱动器使用手册 V1.3", 28),
        ("型号：LC-300", 12),
        ("深圳市蓝川智能科技有限公司", 11),
    ]
    body = [
        [
            ("感谢您选择蓝川智能科技有限公司的产品。", 10),
            ("驱动器报警时红色指示灯亮，电机停止运行。", 10),
            ("请检查电源电压和电机接线。", 10),
        ]
        for _ in range(3)
    ]
    info = info_of(make_pdf(tmp_path / "lc300.pdf", [cover, *body], {"author": "Administrator"}))
    assert (info.vendor, info.model, info.version, info.language) == ("蓝川智能科技", "LC-300", "V1.3", "zh")
    assert info.title == "伺服驱动器使用手册 V1.3"


@pytest.mark.parametrize(
    "title", ["Microsoft Word - manual.doc", "12345", "drive_manual_v2.pdf", "<4D6963726F736F6674>"]
)
def test_document_information_that_is_no_title_or_vendor_is_ignored(tmp_path, title):
    # No cover (all text the same size) and no vendor in the text (a trademark notice names
    # someone else): nothing better than the file name.
    pages = body_pages("drive")
    pages[-1].append(("Windows is a registered trademark of Microsoft Corporation.", 10))
    path = make_pdf(tmp_path / "drive_manual.pdf", pages, {"author": "12345", "title": title})
    info = info_of(path)
    assert info.title == "drive manual"
    assert info.vendor == ""


def test_a_certifier_named_in_an_approval_is_no_vendor(tmp_path):
    pages = [
        [
            ("Approvals: Underwriters Laboratories Inc. Listed: File No. MP268", 10),
            ("Honeywell International Inc.", 10),
            *[(line, 10) for line in BODY],
        ],
        [("Zertifizierungsbedingungen von Underwriters Laboratories Inc. (UL) beachten.", 10)],
    ]
    assert info_of(make_pdf(tmp_path / "m.pdf", pages * 2)).vendor == "Honeywell International"


def test_a_plausible_document_title_is_used_when_there_is_no_cover(tmp_path):
    path = make_pdf(tmp_path / "m.pdf", body_pages("drive"), {"title": "Optidrive E3 Installation Guide"})
    assert info_of(path).title == "Optidrive E3 Installation Guide"


def test_the_vendor_from_the_web_site_as_the_text_spells_it(tmp_path):
    pages = [
        [("Ferrotek Drives support: visit www.ferrotekdrives.com for updates.", 10), *[(line, 10) for line in BODY]]
    ]
    assert info_of(make_pdf(tmp_path / "m.pdf", pages * 3)).vendor == "Ferrotek Drives"


def test_a_site_that_hosts_anyones_files_is_no_vendor(tmp_path):
    pages = [[("Example code: https://github.com/ferrotek/can-demo and https://www.youtube.com/watch", 10)]]
    assert info_of(make_pdf(tmp_path / "m.pdf", [*pages, *body_pages("FT20")])).vendor == ""
    pages[0].append(("Support: www.ferrotekdrives.com", 10))
    assert info_of(make_pdf(tmp_path / "n.pdf", [*pages, *body_pages("FT20")])).vendor == "Ferrotekdrives"


@pytest.mark.parametrize(
    "text, version",
    [
        ("V7.10", "V7.10"),
        ("Rev 4", "V4"),
        ("Rev1.0", "V1.0"),
        ("Version 3.30", "V3.30"),
        ("Revision 2", "V2"),
        ("2.1", "V2.1"),
        ("REV 4: AUGUST 17, 2010", "V4"),
        ("no number", ""),
    ],
)
def test_version_spellings(text, version):
    assert normalize_version(text) == version


def test_sidecar_file(tmp_path):
    pdf = tmp_path / "drive.pdf"
    assert read_sidecar(pdf) == {}
    (tmp_path / "drive.pdf.toml").write_text(
        'vendor = "Quillon"\nmodel = "QM-420"\ndevice = "press-3"\n', encoding="utf-8"
    )
    assert read_sidecar(pdf) == {"vendor": "Quillon", "model": "QM-420", "device": "press-3"}


@pytest.mark.parametrize(
    "content, named",
    [
        ('vendr = "Quillon"\n', "'vendr'"),
        ("version = 2.1\n", "'version' must be a string"),
        ('language = "fr"\n', "'language' must be one of"),
        ('vendor = "Quillon\n', "cannot read"),
    ],
)
def test_a_bad_sidecar_names_the_file_and_the_key(tmp_path, content, named):
    (tmp_path / "drive.pdf.toml").write_text(content, encoding="utf-8")
    with pytest.raises(ManualError) as error:
        read_sidecar(tmp_path / "drive.pdf")
    assert "drive.pdf.toml" in str(error.value) and named in str(error.value)


def test_cli_flags_beat_the_sidecar_which_beats_the_text(english_manual):
    (english_manual.parent / "qm420.pdf.toml").write_text(
        'vendor = "Quillon GmbH"\nmodel = "QM-420"\n', encoding="utf-8"
    )
    overrides = merge_overrides(read_sidecar(english_manual), {"model": "QM420-B", "version": "5.0", "vendor": None})
    info = info_of(english_manual, overrides)
    assert (info.vendor, info.model, info.version, info.title) == (
        "Quillon GmbH",
        "QM420-B",
        "V5.0",
        "QM420 Stepper Drive User Manual Document BX-2231-S5",
    )


def test_an_operator_binds_a_manual_to_a_device(english_manual):
    assert info_of(english_manual, {"device": "press-3"}).device == "press-3"
