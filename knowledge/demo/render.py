"""Rendering an authored manual into a PDF that looks like a vendor's: cover, running
header and footer, safety notes (a DANGER statement and a framed WARNING panel), a ruled
fault-code table, per-code procedures in running text (a CAUTION beside an entry's steps)
and, optionally, a scanned appendix page without a text layer."""

from __future__ import annotations

import html
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

import pymupdf


class Labels(TypedDict):
    """The fixed words of a manual in one language."""

    vendor: str
    model: str
    version: str
    valid_for: str
    safety: str
    danger: str
    warning: str
    caution: str
    table: str
    text: str
    columns: tuple[str, str, str, str]
    symptom: str
    cause: str
    remedy: str
    page: str  # with {n} and {total}
    appendix: str


LABELS: dict[str, Labels] = {
    "en": {
        "vendor": "Vendor",
        "model": "Model",
        "version": "Version",
        "valid_for": "Valid for",
        "safety": "1 Safety notes",
        "danger": "DANGER",
        "warning": "WARNING",
        "caution": "CAUTION",
        "table": "2 Fault code overview",
        "text": "3 Fault procedures",
        "columns": ("Code", "Name", "Cause", "Remedy"),
        "symptom": "Symptom",
        "cause": "Cause",
        "remedy": "Remedy",
        "page": "Page {n} of {total}",
        "appendix": "Appendix A — Hydraulic and electrical diagrams (scanned)",
    },
    "zh": {
        "vendor": "厂商",
        "model": "型号",
        "version": "版本",
        "valid_for": "适用范围",
        "safety": "1 安全须知",
        "danger": "危险",
        "warning": "警告",
        "caution": "注意",
        "table": "2 故障代码一览表",
        "text": "3 故障处理",
        "columns": ("代码", "名称", "原因", "处理方法"),
        "symptom": "现象",
        "cause": "原因",
        "remedy": "处理方法",
        "page": "第 {n} 页 / 共 {total} 页",
        "appendix": "附录 A — 液压和电气图（扫描件）",
    },
}
CSS = """
body { font-family: sans-serif; font-size: 10pt; }
h1 { font-size: 20pt; } h2 { font-size: 14pt; margin-top: 14pt; } h3 { font-size: 11.5pt; margin-top: 10pt; }
table { border-collapse: collapse; }
td, th { border: 1px solid black; padding: 3px; font-size: 9pt; vertical-align: top; text-align: left; }
p { margin: 2pt 0; }
"""
PAGE = pymupdf.paper_rect("a4")
CONTENT = PAGE + (56, 72, -56, -72)  # noqa: RUF005 -- Rect + tuple moves its edges, it does not concatenate


@dataclass(frozen=True)
class FaultEntry:
    code: str
    title: str
    symptom: str
    cause: str
    steps: list[str]
    caution: str = ""  # printed between cause and remedy (running-text entries)


@dataclass
class ManualDoc:
    title: str
    vendor: str
    model: str
    version: str
    language: str
    valid_for: str
    header: str
    footer_note: str
    heading: str  # e.g. "Fault code: {code} — {title}"
    intro: str = ""
    danger: str = ""  # the safety notes' DANGER statement
    panel: str = ""  # the safety notes' WARNING, framed
    table_faults: list[FaultEntry] = field(default_factory=list)
    text_faults: list[FaultEntry] = field(default_factory=list)
    scanned_appendix: bool = False


def render_pdf(manual: ManualDoc, path: Path) -> None:
    """Write the PDF atomically: a reader never sees half a file."""
    labels = LABELS[manual.language]
    doc = pymupdf.open("pdf", _story_pdf(_html(manual, labels)))
    if manual.scanned_appendix:
        _append_scanned_page(doc, labels["appendix"])
    font = pymupdf.Font("cjk")
    total = doc.page_count
    for page in list(doc)[1:]:
        page.wrap_contents()  # the story leaves its coordinate transform active; isolate it
        writer = pymupdf.TextWriter(page.rect)
        writer.append((CONTENT.x0, 40), manual.header, font=font, fontsize=8)
        footer = f"{labels['page'].format(n=page.number + 1, total=total)} · {manual.footer_note}"
        writer.append((CONTENT.x0, PAGE.height - 32), footer, font=font, fontsize=7)
        writer.write_text(page)
    doc.set_metadata({"title": manual.title, "author": manual.vendor, "creator": "fixloop demo manuals"})
    doc.subset_fonts()
    tmp = path.with_name(f".{path.name}.tmp")
    doc.save(tmp, garbage=3, deflate=True)
    doc.close()
    os.replace(tmp, path)


def _html(manual: ManualDoc, labels: Labels) -> str:
    e = html.escape
    parts = [
        f"<h1>{e(manual.title)}</h1>",
        f"<p>{labels['vendor']}: {e(manual.vendor)}</p>",
        f"<p>{labels['model']}: {e(manual.model)}</p>",
        f"<p>{labels['version']}: {e(manual.version)}</p>",
        f"<p>{labels['valid_for']}: {e(manual.valid_for)}</p>",
        f"<h2>{labels['safety']}</h2><p>{e(manual.intro)}</p>",
    ]
    if manual.danger:
        parts.append(f"<p><b>{labels['danger']}</b> — {e(manual.danger)}</p>")
    if manual.panel:  # a one-cell table: the story draws its border as a frame around the panel
        parts.append(f"<table><tr><td><b>{labels['warning']}</b><br/>{e(manual.panel)}</td></tr></table>")
    if manual.table_faults:
        head = "".join(f"<th>{c}</th>" for c in labels["columns"])
        rows = "".join(
            f"<tr><td>{e(f.code)}</td><td>{e(f.title)}</td><td>{e(f.cause)}</td>"
            f"<td>{'<br/>'.join(f'{n}. {e(s)}' for n, s in enumerate(f.steps, 1))}</td></tr>"
            for f in manual.table_faults
        )
        parts.append(f"<h2>{labels['table']}</h2><table><tr>{head}</tr>{rows}</table>")
    if manual.text_faults:
        parts.append(f"<h2>{labels['text']}</h2>")
        for f in manual.text_faults:
            parts.append(f"<h3>{e(manual.heading.format(code=f.code, title=f.title))}</h3>")
            parts.append(f"<p>{labels['symptom']}: {e(f.symptom)}</p>")
            parts.append(f"<p>{labels['cause']}: {e(f.cause)}</p>")
            if f.caution:
                parts.append(f"<p><b>{labels['caution']}</b> — {e(f.caution)}</p>")
            parts.append(f"<p>{labels['remedy']}:</p>")
            parts.extend(f"<p>{n}. {e(step)}</p>" for n, step in enumerate(f.steps, 1))
    return "".join(parts)


def _story_pdf(markup: str) -> bytes:
    story = pymupdf.Story(html=markup, user_css=CSS)
    buffer = io.BytesIO()
    writer = pymupdf.DocumentWriter(buffer)
    more = True
    while more:
        device = writer.begin_page(PAGE)
        more, _ = story.place(CONTENT)
        story.draw(device)
        writer.end_page()
    writer.close()
    return buffer.getvalue()


def _append_scanned_page(doc: pymupdf.Document, caption: str) -> None:
    """A page as a scanner delivers it: an image of text and drawings, no text layer."""
    paper = pymupdf.open()
    sheet = paper.new_page(width=PAGE.width, height=PAGE.height)
    sheet.insert_font(fontname="cjk", fontbuffer=pymupdf.Font("cjk").buffer)
    sheet.insert_text((CONTENT.x0, CONTENT.y0 + 20), caption, fontname="cjk", fontsize=12)
    for row in range(6):
        y = CONTENT.y0 + 60 + row * 80
        sheet.draw_rect(pymupdf.Rect(CONTENT.x0 + 20, y, CONTENT.x0 + 140, y + 50))
        sheet.draw_line((CONTENT.x0 + 140, y + 25), (CONTENT.x1 - 60, y + 25))
        sheet.draw_circle((CONTENT.x1 - 40, y + 25), 18)
    pixmap = sheet.get_pixmap(dpi=60, colorspace=pymupdf.csGRAY)
    page = doc.new_page(width=PAGE.width, height=PAGE.height)
    page.insert_image(page.rect, pixmap=pixmap)
    paper.close()
