"""Reading a PDF manual with PyMuPDF: text blocks by page, tables, band clipping, scanned pages."""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from knowledge.bands import Bands, PositionedText, find_bands

BOLD_FLAG = 16
MIN_TABLE_DRAWINGS = 4  # find_tables only looks for ruled tables; skip pages without rules


class ManualError(Exception):
    """A file that cannot be indexed; the message says why, for the operator."""


@dataclass(frozen=True)
class Block:
    text: str
    size: float
    bold: bool


@dataclass(frozen=True)
class Table:
    rows: list[list[str]]  # the first row is the header row as printed (or a data row on continuation pages)


@dataclass
class Page:
    number: int  # 1-based, as printed in citations
    blocks: list[Block] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    scanned: bool = False


@dataclass
class RawManual:
    metadata: dict[str, str]
    pages: list[Page]
    bands: Bands
    body_size: float


def read_manual(path: Path) -> RawManual:
    doc = _open(path)
    try:
        raw = [_page_blocks(page) for page in doc]
        # Bands are found line by line: a header and a footer may come out as one text block.
        lines = [
            PositionedText(page.number, text, bbox[1], bbox[3], page.rect.height)
            for page, blocks in zip(doc, raw) for block in blocks for text, bbox in block.lines
        ]
        bands = find_bands(lines, doc.page_count)
        pages = [_content(page, blocks, bands) for page, blocks in zip(doc, raw)]
        return RawManual(
            metadata={k: v for k, v in (doc.metadata or {}).items() if isinstance(v, str) and v},
            pages=pages,
            bands=bands,
            body_size=_body_size(raw),
        )
    finally:
        doc.close()


def _open(path: Path) -> pymupdf.Document:
    try:
        head = path.read_bytes()[:1024]
    except OSError as exc:
        raise ManualError(f"{path.name}: cannot read the file ({exc.strerror or exc})") from None
    if b"%PDF-" not in head:
        raise ManualError(f"{path.name}: not a PDF file (no %PDF header)")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError) as exc:
        raise ManualError(f"{path.name}: damaged PDF ({exc})") from None
    if doc.needs_pass:
        doc.close()
        raise ManualError(f"{path.name}: the PDF is encrypted; export an unprotected copy")
    if doc.page_count == 0:
        doc.close()
        raise ManualError(f"{path.name}: the PDF has no pages")
    return doc


@dataclass(frozen=True)
class _RawBlock:
    lines: list[tuple[str, tuple[float, float, float, float]]]
    size: float
    bold: bool


def _page_blocks(page: pymupdf.Page) -> list[_RawBlock]:
    out = []
    for block in page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]:
        spans = [span for line in block.get("lines", []) for span in line["spans"] if span["text"].strip()]
        if not spans:
            continue
        lines = [("".join(span["text"] for span in line["spans"]).strip(), tuple(line["bbox"])) for line in block["lines"]]
        out.append(_RawBlock(
            lines=[(text, bbox) for text, bbox in lines if text],
            size=max(span["size"] for span in spans),
            bold=all(span["flags"] & BOLD_FLAG or "bold" in span["font"].lower() for span in spans),
        ))
    return out


def _content(page: pymupdf.Page, blocks: list[_RawBlock], bands: Bands) -> Page:
    height = page.rect.height
    kept: list[tuple[str, pymupdf.Rect, float, bool]] = []
    for block in blocks:
        lines = [(text, bbox) for text, bbox in block.lines
                 if not bands.contains(PositionedText(page.number, text, bbox[1], bbox[3], height))]
        if lines:
            box = pymupdf.Rect(lines[0][1])
            for _, bbox in lines[1:]:
                box |= bbox
            kept.append(("\n".join(text for text, _ in lines), box, block.size, block.bold))
    tables: list[Table] = []
    table_boxes: list[pymupdf.Rect] = []
    words = None
    if len(page.get_cdrawings()) >= MIN_TABLE_DRAWINGS:
        clip = pymupdf.Rect(0, bands.top * height, page.rect.width, bands.bottom * height)
        # The layout model is for unruled tables and costs ~0.2 s a page; manuals' code tables are ruled.
        for found in page.find_tables(clip=clip, use_layout=False).tables:
            words = words if words is not None else page.get_text("words", flags=pymupdf.TEXTFLAGS_TEXT)
            rows = [[_cell_text(words, cell) for cell in row.cells] for row in found.rows]
            if rows and len(rows[0]) >= 2:
                tables.append(Table(rows=rows))
                table_boxes.append(pymupdf.Rect(found.bbox))
    content = [
        Block(text=text, size=size, bold=bold)
        for text, box, size, bold in kept
        if not any(table.contains((box.tl + box.br) / 2) for table in table_boxes)
    ]
    scanned = not kept and bool(page.get_images(full=False))
    return Page(number=page.number + 1, blocks=content, tables=tables, scanned=scanned)


def _cell_text(words: list, cell) -> str:
    """The page's words whose centre lies in the cell, line by line. (The table module's
    own extraction loses word spacing; clipping the page text per cell is 50x slower.)"""
    if not cell:
        return ""
    x0, y0, x1, y1 = cell
    lines: dict[tuple[int, int], list[str]] = {}
    for wx0, wy0, wx1, wy1, text, block, line, _ in words:
        if x0 <= (wx0 + wx1) / 2 <= x1 and y0 <= (wy0 + wy1) / 2 <= y1:
            lines.setdefault((block, line), []).append(text)
    return unicodedata.normalize("NFKC", "\n".join(" ".join(parts) for parts in lines.values())).strip()


def _body_size(raw) -> float:
    sizes = Counter()
    for blocks in raw:
        for block in blocks:
            sizes[round(block.size, 1)] += sum(len(text) for text, _ in block.lines)
    return sizes.most_common(1)[0][0] if sizes else 10.0
