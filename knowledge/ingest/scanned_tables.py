"""Fault tables on scanned pages read from the page's own layout, where no ruling lines frame them.

Page-order OCR reads a table as lines of words. The code column is found from where the words
sit, not taken to be the first column (a numbering or symptom column may come first, a cause
sentence may start a line): the x-position where short code-like tokens start line after line,
that repeat one shape (`oL3`, `oH1`, `oC2`: letters then digits) or stand under a header word
(code, alarm, fault, 报警, 代码, Fehler). Each code is then read again from its own cell with a
whitelist of the characters display codes are made of, at a higher resolution when that read is
no plausible code either: a line of text is read with a language model that turns `oL3` into `oL.3`
or `0L3`. A row whose code cell reads as a sentence gives no entry.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pymupdf

from knowledge.codes import parse_code_cell
from knowledge.ingest.ocr import GUTTER_ZONE, OcrWord, ocr_cells, render
from knowledge.ingest.tables import Table

# Words of a header over a code column, in the manuals' languages.
CODE_HEADER = re.compile(
    r"code|alarm|fault|error|display|fehler|störung|meldung|代码|代碼|报警|警报|故障|显示|异常", re.I
)
# Letters and digits with a dot or a dash inside: what a display shows. Capitals alone (`GF`, `OL`) are
# display codes too; a code column's share of them tells them from words in capitals.
_CAPITALS = re.compile(r"[A-Z]{2,4}")
MIN_ROWS = 3  # code lines a column needs to be a table's
# Share of the lines starting in a column that must start with a plausible code; a column of running
# text has a word there (`The`, `Check`) on most lines.
MIN_CODE_SHARE = 0.6
# Share of a column's codes that must share one shape (letters, digits, marks) without a header over them.
MIN_SHAPE_SHARE = 0.6
COLUMN_TOLERANCE = 1.2  # line heights: code starts this far apart are one column
TABLE_GAP = 2.5  # line heights: a vertical gap this wide ends a table
HEADER_LINES = 3  # lines above a column's first code searched for its header
# A code cell is read as one line of English letters, digits and the marks display codes use.
CODE_LANGUAGE = "eng"
CODE_SEGMENTATION = "7"
CODE_CHARACTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-"
CODE_DPI = 300  # the code cell's first read: the page's OCR resolution
CODE_DPI_AGAIN = 600  # its second, when the first is no plausible code
CELL_MARGIN = 0.25  # line heights of margin around a code's box when its cell is cut out


@dataclass(frozen=True)
class _Word:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def height(self) -> float:
        return self.y1 - self.y0


@dataclass
class _Row:
    code_box: pymupdf.Rect
    box: pymupdf.Rect
    text: str  # right of the code, its continuation lines below


@dataclass(frozen=True)
class _Found:
    header: list[str]  # the header line split at the code column, as printed; [] without one
    header_box: pymupdf.Rect | None
    rows: list[_Row]


def plausible_code(text: str) -> bool:
    """Whether a cell's text is a display code (`oL3`, `PF03`, `EF1`, `E.OC`, `GF`), not a word or a sentence."""
    text = text.strip()
    return " " not in text and (parse_code_cell(text) is not None or _CAPITALS.fullmatch(text) is not None)


def shape(code: str) -> str:
    """A code's shape: letters A, digits 9, marks kept, runs collapsed (`oL3` and `PF03` are `A9`)."""
    return re.sub(r"(.)\1+", r"\1", re.sub(r"\d", "9", re.sub(r"[^\W\d_]", "A", code)))


def layout_tables(page: pymupdf.Page, words: Sequence[OcrWord]) -> list[Table]:
    """Fault tables among a scanned page's OCR words (PDF points), each a code column and the text right
    of it: a row per code, the lines below it without a code continuing it. A 2-up scan's printed pages
    are looked at one by one."""
    placed = [_Word(text, *box) for text, box in words if text.strip()]
    gutter = _gutter(placed, page.rect.width)
    sides = [[w for w in placed if w.x1 <= gutter], [w for w in placed if w.x0 >= gutter]] if gutter else [placed]
    found: list[_Found] = []
    for side in sides:
        lines = _lines(side)
        found += [table for column in _code_columns(lines) if (table := _rows(lines, column)) is not None]
    codes = iter(_read_codes(page, [row.code_box for table in found for row in table.rows]))
    tables = []
    for table in found:
        rows = [(code, row) for row in table.rows if (code := next(codes)) is not None]
        if len(rows) >= MIN_ROWS:
            tables.append(_table(table, rows))
    return tables


def _table(found: _Found, rows: list[tuple[str, _Row]]) -> Table:
    """The rows whose code cells read as codes, under the header."""
    header = [found.header] if found.header_box else []
    boxes = [found.header_box] if found.header_box else []
    boxes += [row.box for _, row in rows]
    whole = pymupdf.Rect(boxes[0])
    for box in boxes[1:]:
        whole |= box
    return Table(
        rows=header + [[code, row.text] for code, row in rows],
        row_boxes=[(b.x0, b.y0, b.x1, b.y1) for b in boxes],
        bbox=(whole.x0, whole.y0, whole.x1, whole.y1),
    )


def _gutter(words: list[_Word], width: float) -> float | None:
    """The x of a gutter no word crosses in the middle of the page, with words on both sides of it."""
    lo, hi = GUTTER_ZONE[0] * width, GUTTER_ZONE[1] * width
    free = [x for x in np.arange(lo, hi, 2.0) if not any(w.x0 < x < w.x1 for w in words)]
    if not free:
        return None
    gutter = float(min(free, key=lambda x: abs(x - width / 2)))
    left = sum(w.x1 <= gutter for w in words)
    return gutter if min(left, len(words) - left) >= 0.15 * len(words) else None


def _lines(words: list[_Word]) -> list[list[_Word]]:
    """Words in visual lines, top to bottom, each left to right."""
    lines: list[list[_Word]] = []
    for word in sorted(words, key=lambda w: ((w.y0 + w.y1) / 2, w.x0)):
        middle = (word.y0 + word.y1) / 2
        if lines and abs(middle - (lines[-1][0].y0 + lines[-1][0].y1) / 2) < 0.5 * word.height:
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line, key=lambda w: w.x0) for line in lines]


@dataclass(frozen=True)
class _Column:
    x0: float
    x1: float  # where the code column's widest code ends
    lines: tuple[int, ...]  # the lines with a code in it
    header: int | None  # the line of its header word


def _starts(line: list[_Word]) -> list[_Word]:
    """The words of a line that start a cell: the first, and each after a gap wider than a line height."""
    height = float(np.median([w.height for w in line]))
    return [b for a, b in zip([None, *line], line) if a is None or b.x0 - a.x1 > height]


def _code_columns(lines: list[list[_Word]]) -> list[_Column]:
    """The x-positions where plausible codes start cells line after line, in a shape they repeat or under a
    header word; most of the cells starting there must be codes. The column with most codes first; a
    column whose lines another already holds (a second code column of one table) is none."""
    starts = [(n, word) for n, line in enumerate(lines) for word in _starts(line)]
    if not starts:
        return []
    height = float(np.median([word.height for _, word in starts]))
    groups: list[list[tuple[int, _Word]]] = []
    for n, word in sorted(starts, key=lambda s: s[1].x0):
        if groups and word.x0 - groups[-1][-1][1].x0 <= COLUMN_TOLERANCE * height:
            groups[-1].append((n, word))
        else:
            groups.append([(n, word)])
    columns = []
    for group in groups:
        coded = sorted(((n, w) for n, w in group if plausible_code(w.text)), key=lambda c: (c[0], c[1].x0))
        if len({n for n, _ in coded}) < MIN_ROWS or len(coded) < MIN_CODE_SHARE * len(group):
            continue
        x0, x1 = min(w.x0 for _, w in coded), max(w.x1 for _, w in coded)
        header = _header(lines, coded[0][0], x0 - height, x1 + height)
        common = Counter(shape(w.text) for _, w in coded).most_common(1)[0][1]
        numbering = all(w.text.isdigit() for _, w in coded)  # 1, 2, 3: items, steps or pins, unless headed
        if header is None and (numbering or common < MIN_SHAPE_SHARE * len(coded)):
            continue
        columns.append(_Column(x0, x1, tuple(n for n, _ in coded), header))
    columns.sort(key=lambda c: -len(c.lines))
    kept: list[_Column] = []
    for column in columns:
        if not any(set(column.lines) & set(other.lines) for other in kept):
            kept.append(column)
    return kept


def _header(lines: list[list[_Word]], first: int, x0: float, x1: float) -> int | None:
    """The line above a column's first code whose word over the column names codes."""
    for n in range(first - 1, max(-1, first - 1 - HEADER_LINES), -1):
        if any(x0 <= w.x0 <= x1 and CODE_HEADER.search(w.text) for w in lines[n]):
            return n
    return None


def _rows(lines: list[list[_Word]], column: _Column) -> _Found | None:
    """The table of a code column: its header (the line that names the codes), then a row per code line
    (the code's box, the text right of it) with the lines below continuing it."""
    first, last = column.lines[0], column.lines[-1]
    height = float(np.median([w.height for n in column.lines for w in lines[n]]))
    left = column.x0 - COLUMN_TOLERANCE * height
    end = last + 1
    while end < len(lines) and lines[end][0].y0 - lines[end - 1][-1].y1 <= TABLE_GAP * height:
        if any(w.x0 < left for w in lines[end]):
            break  # a line starting left of the codes: running text after the table
        end += 1
    rows: list[_Row] = []
    text_starts = []  # where the text right of each code starts: the next column
    for n in range(first, end):
        line = [w for w in lines[n] if w.x1 > left]
        code = next((w for w in line if left <= w.x0 <= column.x1), None) if n in column.lines else None
        if code is not None:
            rest = [w for w in line if w.x0 > code.x1]
            rows.append(_Row(_box([code]), _box(line), _text(rest)))
            text_starts += [rest[0].x0] if rest else []
        elif line and rows:
            rows[-1].text = f"{rows[-1].text}\n{_text(line)}".strip()
            rows[-1].box |= _box(line)
    if sum(bool(row.text) for row in rows) < MIN_ROWS:
        return None  # labels of a drawing (`CN1`, `ENC2`): a fault table says something about its codes
    if column.header is None:
        return _Found([], None, rows)
    head = [w for w in lines[column.header] if w.x1 > left]
    split = min(text_starts, default=column.x1) - COLUMN_TOLERANCE * height / 2
    return _Found(
        [_text([w for w in head if w.x0 < split]), _text([w for w in head if w.x0 >= split])], _box(head), rows
    )


def _text(words: list[_Word]) -> str:
    return " ".join(w.text for w in words)


def _box(words: list[_Word]) -> pymupdf.Rect:
    return pymupdf.Rect(
        min(w.x0 for w in words), min(w.y0 for w in words), max(w.x1 for w in words), max(w.y1 for w in words)
    )


def _read_codes(page: pymupdf.Page, boxes: list[pymupdf.Rect]) -> list[str | None]:
    """Each code cell read again with the display characters alone, at CODE_DPI and, where that read is no
    plausible code, at CODE_DPI_AGAIN; None where neither is (the cell holds a word or a sentence)."""
    first = _read([_cell(page, box, CODE_DPI) for box in boxes], CODE_DPI)
    again_at = [n for n, text in enumerate(first) if not plausible_code(text)]
    again = _read([_cell(page, boxes[n], CODE_DPI_AGAIN) for n in again_at], CODE_DPI_AGAIN)
    read: list[str | None] = [text if plausible_code(text) else None for text in first]
    for n, text in zip(again_at, again):
        read[n] = text if plausible_code(text) else None
    return read


def _read(images: list[np.ndarray], dpi: int) -> list[str]:
    return [
        " ".join(text.split()) for text in ocr_cells(images, CODE_LANGUAGE, dpi, CODE_SEGMENTATION, CODE_CHARACTERS)
    ]


def _cell(page: pymupdf.Page, box: pymupdf.Rect, dpi: int) -> np.ndarray:
    """A code's box on the page, with a margin, as grayscale pixels."""
    margin = CELL_MARGIN * box.height
    clip = (pymupdf.Rect(box.x0 - margin, box.y0 - margin, box.x1 + margin, box.y1 + margin) * page.rotation_matrix) & (
        page.rect
    )
    return render(page, dpi, clip)
