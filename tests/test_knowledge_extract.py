"""Extraction from real PDFs made by our scripts: bands, tables, running text, metadata, bad files."""

from pathlib import Path

import pymupdf
import pytest

from knowledge.codes import code_key
from knowledge.demo.render import FaultEntry, ManualDoc, render_pdf
from knowledge.ingest.extract import ManualError, extract_manual


@pytest.fixture(scope="module")
def manuals(demo_index: Path) -> Path:
    return demo_index.parent / "manuals"


def by_code(path: Path) -> dict:
    return {code_key(r.code): r for r in extract_manual(path).records}


def test_manual_metadata_from_the_cover(manuals):
    info = extract_manual(manuals / "hydra_hp200_v2.1_zh.pdf").info
    assert (info.vendor, info.model, info.version, info.language) == ("Hydra", "HP-200", "V2.1", "zh")
    assert "V2.x" in info.valid_for


def test_running_text_and_table_records(manuals):
    records = by_code(manuals / "hydra_hp200_v2.1_en.pdf")
    e102 = records["E102"]
    assert e102.source == "text" and e102.title == "Motor over-temperature protection"
    assert e102.steps[0] == "Stop the press and switch the main motor off."
    assert any("coolant_level" in s for s in e102.steps) and any("fan" in s for s in e102.steps)
    assert "motor_temp" in e102.cause and e102.symptom
    e103 = records["E103"]
    assert e103.source == "table" and e103.title == "Hydraulic oil over-temperature"
    assert len(e103.steps) == 4 and "oil_temp" in e103.steps[-1]


def test_headers_and_footers_are_not_content(manuals):
    # Every footer says "quote E102 or F03 alarms"; those mentions must not leak into records.
    for record in extract_manual(manuals / "hydra_hp200_v2.1_en.pdf").records:
        for text in [record.title, record.cause, record.symptom, *record.steps]:
            assert "hotline" not in text and "Page " not in text and "Service Manual" not in text


def test_the_machine_model_is_not_a_fault_code(manuals):
    assert "HP200" not in by_code(manuals / "hydra_hp200_v2.1_en.pdf")


def test_code_styles_of_the_cnc_manual(manuals):
    records = by_code(manuals / "meridian_vmc850_v2.1_zh.pdf")
    assert {"E102", "6065", "ALARM1", "04101", "ERROR22", "XX204", "DOOROPEN", "E230"} <= set(records)
    assert records["6065"].title == "主轴过热" and records["6065"].source == "text"


def test_versions_differ_in_the_e102_procedure(manuals):
    old = by_code(manuals / "hydra_hp200_v1.2_en.pdf")["E102"]
    new = by_code(manuals / "hydra_hp200_v2.1_en.pdf")["E102"]
    assert old.steps != new.steps and "E120" not in by_code(manuals / "hydra_hp200_v1.2_en.pdf")


def test_scanned_pages_are_read_by_ocr_and_marked(manuals):
    scanned = extract_manual(manuals / "hydra_hp200_v1.2_en.pdf")
    assert scanned.info.ocr_pages == [4] and scanned.info.scanned_pages == []
    [passage] = [p for p in scanned.passages if p.page == 4]
    assert passage.ocr and "Appendix" in passage.text
    assert extract_manual(manuals / "hydra_hp200_v2.1_en.pdf").info.ocr_pages == []


def test_duplicate_codes_in_one_manual_are_merged(tmp_path):
    entry = FaultEntry(code="E7", title="Pump fault", symptom="", cause="Pump worn.", steps=["Replace the pump."])
    detail = FaultEntry(
        code="E7",
        title="Pump fault",
        symptom="No pressure.",
        cause="Pump worn.",
        steps=["Stop.", "Replace the pump.", "Bleed the circuit."],
    )
    path = tmp_path / "dup.pdf"
    render_pdf(
        ManualDoc(
            title="Pump manual",
            vendor="Acme",
            model="P-1",
            version="V1.0",
            language="en",
            valid_for="P-1",
            header="Acme P-1 V1.0",
            footer_note="Acme",
            heading="Fault code: {code} — {title}",
            table_faults=[entry],
            text_faults=[detail],
        ),
        path,
    )
    extraction = extract_manual(path)
    assert extraction.duplicates == 1
    [record] = extraction.records
    assert record.steps == detail.steps and record.symptom == "No pressure."


def test_bad_files_get_clear_errors(tmp_path):
    text = tmp_path / "notes.pdf"
    text.write_text("just text")
    with pytest.raises(ManualError, match="not a PDF"):
        extract_manual(text)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(ManualError, match="not a PDF"):
        extract_manual(empty)
    locked = tmp_path / "locked.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "E1 secret")
    doc.save(locked, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    with pytest.raises(ManualError, match="encrypted"):
        extract_manual(locked)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    with pytest.raises(ManualError, match=r"broken.pdf"):
        extract_manual(broken)
