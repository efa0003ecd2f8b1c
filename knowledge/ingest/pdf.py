"""Reading a PDF manual with PyMuPDF: text blocks by page in reading order, band clipping,
symbol-font decoding, OCR of pages without a usable text layer, and tables on the pages of fault sections
(ruled ones by PyMuPDF; unruled ones and ruled ones on scanned pages by knowledge.ingest.tables; unruled ones
on scanned pages by knowledge.ingest.scanned_tables)."""

from __future__ import annotations

import itertools
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf

from knowledge.ingest.bands import Bands, PositionedText, find_bands
from knowledge.ingest.ocr import (
    GUTTER_ZONE,
    SCANNED,
    OcrError,
    OcrWord,
    languages_for,
    ocr_pages,
    quick_dpi_for,
    unread_layer,
)
from knowledge.ingest.ruled import ruled_tables
from knowledge.ingest.scanned_tables import layout_tables
from knowledge.ingest.sections import FaultSections, fault_pages
from knowledge.ingest.tables import Columns, Table, scanned_tables, unruled_tables
from knowledge.models import ManualError

BOLD_FLAG = 16
LETTER_SPACED_TOKEN = 4.0  # mean characters per token of a line whose words fell apart (English: ~5)
STRAY_LETTER_SHARE = 0.1
# A line, span or glyph of PyMuPDF's "rawdict" output, and a word of its "words" output.
_RawDict = dict[str, Any]
_Word = tuple[float, float, float, float, str, int, int, int]


@dataclass(frozen=True)
class Block:
    text: str
    size: float
    bold: bool
    bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    line_x: tuple[float, ...] = ()  # where each line starts: the column it belongs to in an unruled table


@dataclass
class Page:
    number: int  # 1-based, as printed in citations
    blocks: list[Block] = field(default_factory=list)  # outside tables, in reading order
    tables: list[Table] = field(default_factory=list)
    # Everything on the page between the bands, tables included, block by block in reading order.
    text_blocks: list[str] = field(default_factory=list)
    scanned: bool = False  # its words are in no usable text layer (`unread_layer`), and OCR did not read them
    ocr: bool = False  # the text comes from OCR (lower confidence)
    outlines: bool = False  # no images, but lettering drawn as outlines or a layer of glyphs that map to no text

    @property
    def text(self) -> str:
        return "\n".join(self.text_blocks)


@dataclass
class RawManual:
    metadata: dict[str, str]
    pages: list[Page]
    bands: Bands
    body_size: float
    sections: FaultSections = field(default_factory=FaultSections)
    ocr_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


def read_manual(path: Path, ocr: bool = True) -> RawManual:
    doc = _open(path)
    try:
        raw = [_page_blocks(page) for page in doc]
        manual = RawManual(
            metadata={k: v for k, v in (doc.metadata or {}).items() if isinstance(v, str) and v},
            pages=[],
            bands=Bands(),
            body_size=10.0,
        )
        # Bands are found line by line (a header and a footer may come out as one text block), and
        # before OCR: a scan's running header is in the text layer, its content is not.
        lines = [
            PositionedText(page.number, text, bbox[1], bbox[3], page.cropbox.height)
            for page, blocks in zip(doc, raw)
            for block in blocks
            for text, bbox in block.lines
        ]
        manual.bands = find_bands(lines, doc.page_count)
        manual.pages = [_content(page, blocks, manual.bands) for page, blocks in zip(doc, raw)]
        # The text layer is judged first: a page with words enough needs no OCR whatever it shows.
        unread = {
            content.number: why
            for page, content in zip(doc, manual.pages)
            if (why := unread_layer(page, content.text)) is not None
        }
        scanned = list(unread)
        layer = "\n".join(t for blocks in raw for b in blocks for t, _ in b.lines)
        languages = languages_for(layer)
        ocr_done = _ocr(path, raw, scanned, manual, languages, quick_dpi_for(layer)) if ocr and scanned else {}
        for number in ocr_done:
            manual.pages[number - 1] = _content(doc[number - 1], raw[number - 1], manual.bands)
        manual.body_size = _body_size(raw)
        for page in manual.pages:
            page.scanned = page.number in scanned and page.number not in ocr_done
            page.ocr = page.number in ocr_done
            page.outlines = unread.get(page.number, SCANNED) != SCANNED
        manual.sections = fault_pages(manual.pages, manual.body_size)
        carried: Columns | None = None
        for page in manual.pages:
            if page.number not in manual.sections.pages:
                carried = None
            elif page.ocr:
                _add_scanned_tables(doc[page.number - 1], page, manual, languages, ocr_done[page.number])
            else:
                carried = _add_tables(doc[page.number - 1], page, manual.bands, carried)
        return manual
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


def page_count(path: Path) -> int:
    """How long a manual is, to schedule its reading: 0 when PyMuPDF cannot open it (reading it says why)."""
    try:
        with pymupdf.open(path) as doc:
            return int(doc.page_count)
    except Exception:  # whatever a damaged file raises, reading it reports
        return 0


@dataclass(frozen=True)
class _RawBlock:
    lines: list[tuple[str, tuple[float, float, float, float]]]
    size: float
    bold: bool

    @property
    def bbox(self) -> pymupdf.Rect:
        return pymupdf.Rect(
            min(b[0] for _, b in self.lines),
            min(b[1] for _, b in self.lines),
            max(b[2] for _, b in self.lines),
            max(b[3] for _, b in self.lines),
        )


def decode_text(text: str) -> str:
    """NFKC, and symbol fonts' private-use code points back to ASCII: fonts such as a
    7-segment display face map their glyphs to U+F020-U+F07E (Microsoft's symbol
    encoding); U+F080 and above are dingbats and bullets, which carry no text."""
    out = []
    for char in text:
        code = ord(char)
        if 0xF020 <= code <= 0xF07E:
            out.append(chr(code - 0xF000))
        elif not 0xF07F <= code <= 0xF0FF:
            out.append(char)
    return unicodedata.normalize("NFKC", "".join(out))


def _page_blocks(page: pymupdf.Page) -> list[_RawBlock]:
    """Blocks from PyMuPDF's `dict` output; glyph positions (`rawdict`, twice the cost) are read
    from the same text page only for a page with a letter-spaced line."""
    textpage = page.get_textpage(flags=pymupdf.TEXTFLAGS_TEXT)
    glyphs = _Glyphs(page, textpage)
    out = []
    for b, block in enumerate(page.get_text("dict", textpage=textpage)["blocks"]):
        spans = [span for line in block.get("lines", []) for span in line["spans"] if span["text"].strip()]
        if not spans:
            continue
        lines = [(_line_text(line, glyphs, b, n), tuple(line["bbox"])) for n, line in enumerate(block["lines"])]
        lines = [(text, bbox) for text, bbox in lines if text]
        if lines:
            out.append(
                _RawBlock(
                    lines=lines,
                    size=max(span["size"] for span in spans),
                    bold=all(span["flags"] & BOLD_FLAG or "bold" in span["font"].lower() for span in spans),
                )
            )
    # Text comes in the page's stored coordinates (cropbox), which a /Rotate turns for display.
    return _reading_order(out, page.cropbox.width)


class _Glyphs:
    """The glyphs of a text page's lines, extracted on first use."""

    def __init__(self, page: pymupdf.Page, textpage: pymupdf.TextPage):
        self._page = page
        self._textpage = textpage
        self._blocks: list[_RawDict] | None = None

    def line(self, block: int, line: int) -> list[_RawDict]:
        if self._blocks is None:
            self._blocks = self._page.get_text("rawdict", textpage=self._textpage)["blocks"]
        return [c for span in self._blocks[block]["lines"][line]["spans"] for c in span["chars"]]


def _line_text(line: _RawDict, glyphs: _Glyphs, block: int, number: int) -> str:
    """Text set glyph by glyph with extra letter spacing comes out as `e r r o r : 1`: such a
    line is rebuilt from its glyph positions, a word break being a gap clearly wider than the
    line's usual gap between letters."""
    text = decode_text("".join(span["text"] for span in line["spans"])).strip()
    if not _letter_spaced(text):
        return text
    chars = glyphs.line(block, number)
    return decode_text(_words(chars)).strip() if chars else text


class _Respacer:
    """Table cells cut from letter-spaced text, rebuilt the same way from the page's glyphs."""

    def __init__(self, page: pymupdf.Page):
        self._page = page
        self._glyphs: list[_RawDict] | None = None

    def region(self, text: str, rect: pymupdf.Rect) -> str:
        if not _letter_spaced(text):
            return text
        x0, y0, x1, y1 = rect
        inside = [
            g
            for g in self._all()
            if x0 <= (g["bbox"][0] + g["bbox"][2]) / 2 <= x1 and y0 <= (g["bbox"][1] + g["bbox"][3]) / 2 <= y1
        ]
        lines: list[list[_RawDict]] = []
        for glyph in sorted(inside, key=lambda g: (round(g["bbox"][3]), g["bbox"][0])):
            if lines and abs(lines[-1][-1]["bbox"][3] - glyph["bbox"][3]) < 2:
                lines[-1].append(glyph)
            else:
                lines.append([glyph])
        rebuilt = "\n".join(_words(line) for line in lines if line)
        return decode_text(rebuilt) if rebuilt.strip() else text

    def _all(self) -> list[_RawDict]:
        if self._glyphs is None:
            self._glyphs = [
                c
                for block in self._page.get_text("rawdict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]
                for line in block.get("lines", [])
                for span in line["spans"]
                for c in span["chars"]
            ]
        return self._glyphs


def _letter_spaced(text: str) -> bool:
    """Short tokens on average, or words broken into stray letters (`Soft l imits`). A false alarm
    costs only time: rebuilding a normal line from its glyphs gives the same text."""
    tokens = text.split()
    stray = sum(len(t) == 1 and t.isalpha() and t not in "aAI" for t in tokens)
    return len(tokens) >= 3 and (
        sum(map(len, tokens)) <= LETTER_SPACED_TOKEN * len(tokens) or stray >= max(2, STRAY_LETTER_SHARE * len(tokens))
    )


def _words(glyphs: list[_RawDict]) -> str:
    """A gap clearly wider than the usual gap between letters breaks a word. Space glyphs are
    no guide: PyMuPDF makes them up between glyphs set one by one."""
    inked = [g for g in glyphs if g["c"].strip()]
    gaps = sorted(b["bbox"][0] - a["bbox"][2] for a, b in itertools.pairwise(inked))
    if not gaps:
        return "".join(g["c"] for g in inked)
    size = inked[0]["bbox"][3] - inked[0]["bbox"][1]
    threshold = gaps[len(gaps) // 2] + 0.2 * size
    out: str = inked[0]["c"]
    for a, b in itertools.pairwise(inked):
        out += (" " if b["bbox"][0] - a["bbox"][2] > threshold else "") + b["c"]
    return out


def _reading_order(blocks: list[_RawBlock], width: float) -> list[_RawBlock]:
    """Two columns, or two printed pages set side by side (2-up), are read left then right:
    PyMuPDF's order interleaves them line by line."""
    boxes = [block.bbox for block in blocks]
    tops = {id(block): box.y0 for block, box in zip(blocks, boxes)}
    lo, hi = GUTTER_ZONE[0] * width, GUTTER_ZONE[1] * width
    gutters = [x for x in range(int(lo), int(hi), 2) if not any(box.x0 < x < box.x1 for box in boxes)]
    if not gutters:
        return blocks
    gutter = min(gutters, key=lambda x: abs(x - width / 2))
    left = [b for b, box in zip(blocks, boxes) if box.x1 <= gutter]
    right = [b for b, box in zip(blocks, boxes) if box.x0 >= gutter]
    if not left or not right or min(_chars(left), _chars(right)) < 0.15 * _chars(blocks):
        return blocks
    return sorted(left, key=lambda b: tops[id(b)]) + sorted(right, key=lambda b: tops[id(b)])


def _chars(blocks: list[_RawBlock]) -> int:
    return sum(len(text) for block in blocks for text, _ in block.lines)


def _ocr(
    path: Path, raw: list[list[_RawBlock]], numbers: list[int], manual: RawManual, languages: str, quick_dpi: int | None
) -> dict[int, list[OcrWord]]:
    """Replace the blocks of scanned pages by their OCR text and return those pages with their words;
    pages OCR could not read stay scanned, each named in a warning."""
    started = time.perf_counter()
    try:
        run = ocr_pages(path, numbers, languages, quick_dpi=quick_dpi)
    except OcrError as exc:
        manual.warnings.append(f"OCR skipped: {exc}")
        return {}
    finally:
        manual.ocr_seconds = time.perf_counter() - started
    manual.warnings += [f"{path.name}: {why}; the page is left without text" for why in run.unread.values()]
    read = run.pages
    for number, page in read.items():
        size = _body_size([raw[number - 1]]) if raw[number - 1] else 10.0
        raw[number - 1] = [
            _RawBlock(lines=[(decode_text(text), bbox)], size=size, bold=False)
            for text, bbox in page.lines
            if text.strip()
        ]
    return {number: page.words for number, page in read.items()}


def _content(page: pymupdf.Page, blocks: list[_RawBlock], bands: Bands) -> Page:
    height = page.cropbox.height
    kept: list[Block] = []
    for block in blocks:
        lines = [
            (text, bbox)
            for text, bbox in block.lines
            if not bands.contains(PositionedText(page.number, text, bbox[1], bbox[3], height))
        ]
        if lines:
            box = _RawBlock(lines=lines, size=block.size, bold=block.bold).bbox
            kept.append(
                Block(
                    text="\n".join(text for text, _ in lines),
                    size=block.size,
                    bold=block.bold,
                    bbox=tuple(box),
                    line_x=tuple(bbox[0] for _, bbox in lines),
                )
            )
    return Page(number=page.number + 1, blocks=kept, text_blocks=[block.text for block in kept])


def _add_tables(page: pymupdf.Page, content: Page, bands: Bands, carried: Columns | None) -> Columns | None:
    """Tables of a fault-section page, ruled or else unruled with a fault header; the blocks
    inside them leave the running text. Returns the columns of an unruled table that runs on
    to the next page (`carried`: the one from the page before).

    Tables are found on the page as displayed (a landscape table is often stored upright with a
    /Rotate), and kept in the stored page's coordinates, as its words and blocks are."""
    height = page.rect.height
    clip = pymupdf.Rect(0, bands.top * height, page.rect.width, bands.bottom * height)
    words = page.get_text("words", flags=pymupdf.TEXTFLAGS_TEXT)
    stored = page.derotation_matrix
    respaced: _Respacer | None = None
    ruled = ruled_tables(page, clip)
    for found in ruled:
        respaced = respaced or _Respacer(page)
        rows = [
            [_cell(words, respaced, _moved(cell, stored), page.rotation) if cell else "" for cell in row.cells]
            for row in found.rows
        ]
        if rows and len(rows[0]) >= 2:
            row_boxes = [_moved(row.bbox, stored) for row in found.rows]
            content.tables.append(Table(rows=rows, row_boxes=row_boxes, bbox=_moved(found.bbox, stored)))
    if content.tables:
        _leave_running_text(content, content.tables)
        return None
    shown = page.rotation_matrix
    unruled, carried = unruled_tables(
        [(*_moved(w[:4], shown), w[4]) for w in words] if page.rotation else [tuple(w[:5]) for w in words],
        tuple(clip),
        carried,
    )
    if page.rotation:
        unruled = [
            Table(rows=t.rows, row_boxes=[_moved(box, stored) for box in t.row_boxes], bbox=_moved(t.bbox, stored))
            for t in unruled
        ]
    content.tables.extend(unruled)
    _leave_running_text(content, unruled)
    return carried


def _cell(words: list[Any], respaced: _Respacer, box: tuple[float, float, float, float], rotation: int) -> str:
    """A ruled cell's text; letter-spaced text rebuilt from its glyphs, which reads lines across the
    stored page (so not on a page whose lines run down it, stored rotated)."""
    text = _cell_text(words, box)
    return respaced.region(text, pymupdf.Rect(box)) if not rotation else text


def _moved(box: Sequence[float], matrix: pymupdf.Matrix) -> tuple[float, float, float, float]:
    """A box in the other coordinates of the page (as displayed, or as stored)."""
    rect = pymupdf.Rect(box) * matrix
    return (rect.x0, rect.y0, rect.x1, rect.y1)


def _add_scanned_tables(
    page: pymupdf.Page, content: Page, manual: RawManual, languages: str, words: list[OcrWord]
) -> None:
    """Ruled tables on a scanned page, else tables found from where its words sit (a code column)."""
    started = time.perf_counter()
    try:
        found = scanned_tables(page, languages, words) or layout_tables(page, words)
    except OcrError as exc:
        manual.warnings.append(f"page {content.number}: table cells not read: {exc}")
        return
    finally:
        manual.ocr_seconds += time.perf_counter() - started
    content.tables.extend(found)
    _leave_running_text(content, found)


def _leave_running_text(content: Page, tables: list[Table]) -> None:
    boxes = [pymupdf.Rect(table.bbox) for table in tables]
    content.blocks = [b for b in content.blocks if not any(t.contains(_centre(pymupdf.Rect(b.bbox))) for t in boxes)]


def _centre(box: pymupdf.Rect) -> pymupdf.Point:
    return (box.tl + box.br) / 2


def _cell_text(words: list[_Word], cell: tuple[float, float, float, float] | None) -> str:
    """The page's words whose centre lies in the cell, line by line. (The table module's
    own extraction loses word spacing; clipping the page text per cell is 50x slower.)"""
    if not cell:
        return ""
    x0, y0, x1, y1 = cell
    lines: dict[tuple[int, int], list[str]] = {}
    for wx0, wy0, wx1, wy1, text, block, line, _ in words:
        if x0 <= (wx0 + wx1) / 2 <= x1 and y0 <= (wy0 + wy1) / 2 <= y1:
            lines.setdefault((block, line), []).append(text)
    return decode_text("\n".join(" ".join(parts) for parts in lines.values())).strip()


def _body_size(raw: list[list[_RawBlock]]) -> float:
    sizes: Counter[float] = Counter()
    for blocks in raw:
        for block in blocks:
            sizes[round(block.size, 1)] += sum(len(text) for text, _ in block.lines)
    return sizes.most_common(1)[0][0] if sizes else 10.0
