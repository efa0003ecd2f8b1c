"""One PDF in, its manual description, fault records, page passages and hazard statements out."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from knowledge.codes import code_key
from knowledge.ingest.languages import detect
from knowledge.ingest.metadata import manual_info, merge_overrides, read_sidecar
from knowledge.ingest.passages import Passage, page_passages
from knowledge.ingest.pdf import read_manual
from knowledge.ingest.records import assemble
from knowledge.ingest.safety import find_statements
from knowledge.models import FaultRecord, ManualError, ManualInfo, SafetyStatement

__all__ = ["Extraction", "ManualError", "extract_manual", "file_sha256"]


@dataclass
class Extraction:
    info: ManualInfo
    records: list[FaultRecord]
    duplicates: int
    passages: list[Passage]
    safety: list[SafetyStatement]
    ocr_seconds: float
    warnings: list[str]
    outline_pages: list[int]  # no images, but lettering drawn as outlines or a layer of unmapped glyphs


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise ManualError(f"{path.name}: cannot read the file ({exc.strerror or exc})") from None
    return digest.hexdigest()


def extract_manual(
    path: Path, sha256: str | None = None, overrides: dict[str, str | None] | None = None, ocr: bool = True
) -> Extraction:
    """`overrides`: the operator's word on vendor, model, version, device… (command-line options),
    over a sidecar file beside the PDF, over what the pages say."""
    raw = read_manual(path, ocr=ocr)
    said = merge_overrides(read_sidecar(path), overrides or {})
    info = manual_info(path, sha256 or file_sha256(path), raw, said)
    info = info.model_copy(
        update={
            "ocr_pages": [page.number for page in raw.pages if page.ocr],
            "fault_sections": raw.sections.count,
        }
    )
    assembly = assemble(
        raw.pages, raw.body_size, raw.sections.pages, frozenset(code_key(name) for name in (info.model,) if name)
    )
    # A page's language is its own, and a passage's or an entry's too where its text says enough: a page that
    # cannot be told (a table of codes and numbers) is in its manual's language. The operator's word on the
    # language (a sidecar, an option) is every page's.
    told = "language" not in said
    pages = {page.number: detect(page.text, info.language) if told else info.language for page in raw.pages}
    records = [
        record.model_copy(update={"language": detect(_text(record), pages[record.page]) if told else info.language})
        for record in assembly.records
    ]
    return Extraction(
        info=info,
        records=records,
        duplicates=assembly.duplicates,
        passages=page_passages(
            raw.pages,
            raw.sections,
            {page for record in records for page in record.pages},
            pages,
            told,
        ),
        safety=find_statements(path, raw.pages, raw.body_size, assembly.records),
        ocr_seconds=raw.ocr_seconds,
        warnings=raw.warnings,
        outline_pages=[page.number for page in raw.pages if page.outlines],
    )


def _text(record: FaultRecord) -> str:
    return "\n".join([record.title, record.symptom, record.cause, *record.steps])
