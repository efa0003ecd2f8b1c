"""The records the knowledge package hands around: manuals, fault records, search hits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Match = Literal["exact", "lookalike", "lexical", "semantic"]  # lookalike: the code read as a printed one
HitKind = Literal["entry", "page"]
Signal = Literal["danger", "warning", "caution"]
# Why a statement is general, or whose it is: printed inside an entry, a safety chapter, the
# opening pages, a framed panel, beside a pictogram; on an entry's page; elsewhere in the text.
Placement = Literal["entry", "chapter", "opening", "panel", "pictogram", "page", "text"]


class ManualError(Exception):
    """A file that cannot be indexed; the message says why, for the operator."""


class ManualInfo(BaseModel):
    file: str
    sha256: str
    title: str = ""
    vendor: str = ""
    model: str = ""
    version: str = ""
    language: str = "en"  # the language of most of its pages
    languages: list[str] = Field(default_factory=list)  # every language a good share of its pages is in
    valid_for: str = ""
    pages: int = 0
    scanned_pages: list[int] = Field(default_factory=list)  # images without text, even after OCR
    ocr_pages: list[int] = Field(default_factory=list)
    fault_sections: int = 0
    device: str = ""  # the device an operator bound the manual to, if any
    overrides: str = ""  # what the operator said (sidecar file, options), as indexed


class FaultRecord(BaseModel):
    code: str
    title: str = ""
    symptom: str = ""
    cause: str = ""
    steps: list[str] = Field(default_factory=list)
    page: int
    pages: list[int]
    source: Literal["table", "text"]
    language: str = ""  # its text's own (a page may hold two languages); empty: its manual's
    # Where the entry is printed, for highlighting it on its page: (page, x0, y0, x1, y1) in PDF points
    # of the unrotated page, as PyMuPDF's text extraction gives them.
    boxes: list[tuple[int, float, float, float, float]] = Field(default_factory=list)

    def merge(self, other: FaultRecord) -> FaultRecord:
        """The same code twice in one manual (overview table and detail section): keep the richer parts."""

        def longer(a: str, b: str) -> str:
            return a if len(a) >= len(b) else b

        return self.model_copy(
            update={
                "title": longer(self.title, other.title),
                "symptom": longer(self.symptom, other.symptom),
                "cause": longer(self.cause, other.cause),
                "steps": self.steps if len(self.steps) >= len(other.steps) else other.steps,
                "pages": sorted(set(self.pages) | set(other.pages)),
                "boxes": self.boxes + [box for box in other.boxes if box not in self.boxes],
            }
        )


class SafetyStatement(BaseModel):
    """A hazard statement a manual prints (knowledge.ingest.safety)."""

    signal_word: Signal  # normalised: 警告 is "warning"
    label: str = ""  # the signal word as printed ("WARNING", "警告"); empty beside a pictogram
    text: str
    page: int
    general: bool  # the manual's, for any work on the machine; else the entries in `codes`
    electrical: bool  # voltage, DC bus, capacitors, power off, isolation
    placement: Placement
    codes: list[str] = Field(default_factory=list)  # the fault entries it belongs to, as printed


class Scope(BaseModel):
    """Which machine a question is about; empty fields match everything."""

    vendor: str = ""
    model: str = ""
    label: str = ""


class Hit(BaseModel):
    fault_code: str
    canonical_id: str
    title: str
    symptom: str
    cause: str
    steps: list[str]
    manual: str
    manual_sha256: str = ""
    manual_title: str
    version: str
    version_compatibility: str
    language: str
    page: int
    pages: list[int]
    vendor: str
    model: str
    scope: str
    applies_to_device: bool | None
    score: float
    match: Match
    kind: HitKind = "entry"  # a structured fault entry, or a page passage when no entry matched
    snippet: str = ""  # the matched text, for a page hit
    ocr: bool = False  # the page's text comes from OCR: lower confidence


class SearchResult(BaseModel):
    status: Literal["ok", "not_found"]
    hits: list[Hit] = Field(default_factory=list)
    message: str = ""
    suggestion: str | None = None
