"""Fault tables read as rows of cells before entries are made from them.

Ruled tables on text pages are PyMuPDF's (knowledge.ingest.pdf). Here are the two it cannot read:
- unruled tables, set with tab stops: the columns are where the header's words start, a row
  starts where the code column holds a code, and lines with an empty code cell continue it;
- ruled tables on scanned pages: the ruling lines are found on the rendered page image and
  each cell is OCR'd by itself, as page-order OCR reads a table column by column.
A table is only kept when its header (or, on a scan, its content) has a code column: anything
else stays running text.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pymupdf

from knowledge.codes import parse_code_cell
from knowledge.ingest.languages import ROLES, column_names, words_of
from knowledge.ingest.ocr import OcrWord, grayscale, ocr_cells

# Labels of a field in running text (`Cause:`, `原因：`, `Ursache:`), every language's (`languages.py`).
FIELD_WORDS = {role: words_of(role) for role in ("symptom", "cause", "remedy")}
MAX_HEADER_CHARS = 30
# A column's names in a table's header: the labels and the further names of each role.
_COLUMN_NAMES = {role: column_names(role) for role in ROLES}
_COLUMN_ORDER = ("remedy", "cause", "symptom", "code", "title")

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Table:
    rows: list[list[str]]  # the first row is the header row as printed (or a data row on continuation pages)
    row_boxes: list[Box]  # one per row, where it is printed (PDF points)
    bbox: Box = (0.0, 0.0, 0.0, 0.0)


def column_roles(header: Sequence[str]) -> dict[int, str]:
    """Which column holds the code, the name, the cause, the remedy, by the header's words. A column that only
    numbers the rows (`No.`, also a code column's name) holds the code only where no other column is named so:
    `No. | Error code | Cause | Remedy` is keyed by its error codes, not by 1, 2, 3."""
    roles = _roles(header)
    code = next((i for i, role in roles.items() if role == "code"), None)
    if code is not None and numbers_rows(header[code]):
        named = _roles(header, skip=code)
        if any(role == "code" and not numbers_rows(header[i]) for i, role in named.items()):
            return named
    return roles


# A header cell that only numbers the rows (`No.`, `Nr.`, `Pos.`, `#`, `序号`), whatever marks OCR reads beside it.
_RUNNING_NUMBER = re.compile(r"(?:no|nr|pos)\.?|#|序号", re.I)


def numbers_rows(cell: str) -> bool:
    """Whether a header cell only numbers its table's rows (on its first line: OCR adds specks below)."""
    first = next((line for line in cell.splitlines() if line.strip()), "")
    return _RUNNING_NUMBER.fullmatch(re.sub(r"[^\w.#]", "", unicodedata.normalize("NFKC", first))) is not None


def _roles(header: Sequence[str], skip: int | None = None) -> dict[int, str]:
    roles: dict[int, str] = {}
    names = [_header_name(cell) for cell in header]
    for index, name in enumerate(names):
        if len(name) > MAX_HEADER_CHARS or index == skip:
            continue  # a data cell that happens to say "cause" or "解除"
        for role in _COLUMN_ORDER:
            if role in roles.values() and role != "title":
                continue
            if _says_role(name, role):
                if role not in roles.values():
                    roles[index] = role
                elif "cause" not in roles.values() and not any(_says_role(n, "cause") for n in names[index + 1 :]):
                    # "Fault | Description": the second name describes what happened, unless a cause column
                    # follows (`Anzeige | Störung | Ursache | Abhilfe`: the display, the fault, its cause).
                    roles[index] = "cause"
                break
    return roles


def named_roles(header: Sequence[str]) -> set[str]:
    """The roles a header's cells name in their own words: not those `column_roles` gives a column from its
    neighbours (a second name column read as a fault's description)."""
    names = [_header_name(cell) for cell in header]
    return {role for name in names for role in ROLES if _says_role(name, role)}


def _header_name(cell: str) -> str:
    name = " ".join(unicodedata.normalize("NFKC", cell).lower().split())
    return re.sub(r"(?<=[\u3400-\u9fff]) (?=[\u3400-\u9fff])", "", name)  # 意 义 is 意义, spaced to fill the cell


def _says_role(name: str, role: str) -> bool:
    """Whether a header cell names a column with the role, in any language (`languages.column_names`)."""
    return len(name) <= MAX_HEADER_CHARS and _COLUMN_NAMES[role].search(name) is not None


def fault_header(cells: Sequence[str]) -> bool:
    """A header of a fault table: a code column and at least one more column it names."""
    roles = column_roles(cells)
    return "code" in roles.values() and len(roles) >= 2


# -- unruled tables on text pages ------------------------------------------------------

_Word = tuple[float, float, float, float, str]
# Header phrases are apart by more than this many line heights; words of one phrase are closer.
HEADER_GAP = 0.8
# A table ends at a vertical gap of this many line heights (a paragraph or a heading follows).
TABLE_GAP = 2.5
MIN_CODED_ROWS = 2


@dataclass(frozen=True)
class Columns:
    """An unruled table's column starts, carried to the next page that goes on without a header."""

    starts: tuple[float, ...]
    ran_to_foot: bool  # the table reached the foot of its page: the next page may continue it


def _lines(words: list[_Word]) -> list[list[_Word]]:
    """Words in visual lines, top to bottom, each left to right: a tab-set table interleaves
    the lines of neighbouring cells in the text layer."""
    lines: list[list[_Word]] = []
    for word in sorted(words, key=lambda w: ((w[1] + w[3]) / 2, w[0])):
        middle = (word[1] + word[3]) / 2
        if lines and abs(middle - (lines[-1][0][1] + lines[-1][0][3]) / 2) < 0.5 * (word[3] - word[1]):
            lines[-1].append(word)
        else:
            lines.append([word])
    return [sorted(line) for line in lines]


def _phrases(line: list[_Word]) -> list[list[_Word]]:
    height = max(w[3] - w[1] for w in line)
    phrases = [[line[0]]]
    for a, b in itertools.pairwise(line):
        if b[0] - a[2] > HEADER_GAP * height:
            phrases.append([b])
        else:
            phrases[-1].append(b)
    return phrases


def _text(words: list[_Word]) -> str:
    return " ".join(w[4] for w in words)


def unruled_tables(words: list[_Word], clip: Box, carried: Columns | None = None) -> tuple[list[Table], Columns | None]:
    """Unruled fault tables among a page's words (`clip`: between the running header and footer),
    and the columns to carry to the next page. `carried`: the previous page's table, if it ran
    to the page foot: lines at the top of this page that fit its columns go on with it."""
    x0, y0, x1, y1 = clip
    lines = _lines([w for w in words if x0 <= w[0] and w[2] <= x1 and y0 <= w[1] and w[3] <= y1])
    tables: list[Table] = []
    columns: Columns | None = None
    at = 0
    if carried is not None and lines:
        repeated = _phrases(lines[0])
        header = len(repeated) == len(carried.starts) and fault_header([_text(p) for p in repeated])
        table, at = _read_rows(lines, 0, carried.starts, header=header, continuing=True)
        if table is not None:
            tables.append(table)
            columns = Columns(carried.starts, ran_to_foot=at == len(lines))
    while at < len(lines):
        phrases = _phrases(lines[at])
        if len(phrases) >= 2 and fault_header([_text(p) for p in phrases]):
            starts = tuple(p[0][0] for p in phrases)
            table, end = _read_rows(lines, at, starts, header=True, continuing=False)
            if table is not None:
                tables.append(table)
                columns = Columns(starts, ran_to_foot=end == len(lines))
                at = end
                continue
        at += 1
    return tables, columns if columns is not None and columns.ran_to_foot else None


def _read_rows(
    lines: list[list[_Word]], at: int, starts: tuple[float, ...], header: bool, continuing: bool
) -> tuple[Table | None, int]:
    """The table whose first line is `lines[at]` (its header, if `header`), and the index of the
    first line after it. A line ends the table when a word crosses a column boundary or after a
    wide vertical gap; a line with a code in the first column starts a row. Lines between the
    header and the first code wrap the header, or (`continuing` the previous page's table)
    are the rest of its last row."""
    bounds = _boundaries(lines, at, starts)
    rows: list[list[list[str]]] = []
    boxes: list[list[float]] = []
    coded = 0
    end = at
    previous_bottom: float | None = None
    for index in range(at, len(lines)):
        line = lines[index]
        height = max(w[3] - w[1] for w in line)
        top, bottom = min(w[1] for w in line), max(w[3] for w in line)
        if previous_bottom is not None and top - previous_bottom > TABLE_GAP * height:
            break
        cells: list[list[str]] = [[] for _ in starts]
        crossing = False
        for word in line:
            column = sum(1 for b in bounds if word[0] >= b)
            if column == 0 or (column < len(bounds) and word[2] > bounds[column] + 1):
                crossing = True
                break
            cells[column - 1].append(word[4])
        if crossing:
            break
        texts = [" ".join(cell) for cell in cells]
        coded_line = parse_code_cell(texts[0]) is not None
        if index == at or coded_line or (continuing and header and len(rows) == 1):
            coded += coded_line
            rows.append([[text] if text else [] for text in texts])
            boxes.append([min(w[0] for w in line), top, max(w[2] for w in line), bottom])
        else:
            for cell, text in zip(rows[-1], texts):
                if text:
                    cell.append(text)
            box = boxes[-1]
            box[0], box[2], box[3] = min(box[0], line[0][0]), max(box[2], line[-1][2]), bottom
        previous_bottom = bottom
        end = index + 1
    if len(rows) - header < 1 or (coded < MIN_CODED_ROWS and not continuing) or len(starts) < 2:
        return None, at + 1 if header else at
    table_box = (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
    return (
        Table(
            rows=[["\n".join(cell) for cell in row] for row in rows],
            row_boxes=[(b[0], b[1], b[2], b[3]) for b in boxes],
            bbox=table_box,
        ),
        end,
    )


def _boundaries(lines: list[list[_Word]], at: int, starts: tuple[float, ...]) -> list[float]:
    """Where each column begins: at the header word's start, or left of it where the data of
    that column begins left of its (centred) header word but clear of the column before."""
    data = [w for line in lines[at + 1 : at + 40] for w in line]
    bounds = [starts[0] - 2.0]
    for left, start in itertools.pairwise(starts):
        free = [x for x in np.arange(start, left, -1.0) if not any(w[0] < x < w[2] for w in data)]
        bounds.append(float(free[0]) - 1.0 if free else start - 2.0)
    return bounds


# -- ruled tables on scanned pages -----------------------------------------------------

# A ruling line is a run of dark pixels at least this share of the page width (horizontal) or
# height (vertical): longer than any letter's stroke, shorter than a narrow column's rule.
MIN_RULE_WIDTH = 0.08
MIN_RULE_HEIGHT = 0.02
DARK = 128
RULE_TOLERANCE = 6  # pixels: rules a scan blurred or skewed by this much still meet
CELL_INSET = 4  # pixels kept off a cell's rules, which OCR reads as | and _
MIN_INK = 0.002  # share of a cell's pixels that are dark for it to hold any text


@dataclass(frozen=True)
class _Rule:
    at: float  # y of a horizontal rule, x of a vertical one
    start: float
    end: float


def _runs(mask: npt.NDArray[np.bool_], length: int) -> list[_Rule]:
    """Runs of at least `length` dark pixels along each row of `mask`, merged over adjacent rows."""
    padded = np.pad(mask.astype(np.int32), ((0, 0), (1, 1)))
    found: list[_Rule] = []
    for y in np.flatnonzero(mask.sum(axis=1) >= length):
        edges = np.flatnonzero(np.diff(padded[y]))
        for start, end in zip(edges[::2], edges[1::2]):
            if end - start >= length:
                found.append(_Rule(float(y), float(start), float(end)))
    merged: list[_Rule] = []
    for rule in sorted(found, key=lambda r: (r.start, r.at)):
        same = next(
            (
                i
                for i, m in enumerate(merged)
                if abs(rule.at - m.at) <= RULE_TOLERANCE and abs(rule.start - m.start) <= RULE_TOLERANCE * 4
            ),
            None,
        )
        if same is None:
            merged.append(rule)
        else:
            m = merged[same]
            merged[same] = _Rule(max(m.at, rule.at), min(m.start, rule.start), max(m.end, rule.end))
    return sorted(merged, key=lambda r: r.at)


def _grid(
    image: npt.NDArray[np.uint8],
) -> list[tuple[list[float], list[float], list[_Rule], list[_Rule]]]:
    """Grids of ruling lines on a page image: each as its row edges, column edges and rules."""
    dark = image < DARK
    # A rule one pixel off level over its length is still one rule: thicken by the tolerance first.
    thick_h = dark.copy()
    thick_v = dark.copy()
    for shift in range(1, RULE_TOLERANCE // 2 + 1):
        thick_h[shift:] |= dark[:-shift]
        thick_v[:, shift:] |= dark[:, :-shift]
    height, width = image.shape
    horizontal = _runs(thick_h, int(MIN_RULE_WIDTH * width))
    vertical = [_Rule(r.at, r.start, r.end) for r in _runs(thick_v.T, int(MIN_RULE_HEIGHT * height))]
    grids = []
    for group in _connected(horizontal, vertical):
        hs = [r for r in horizontal if id(r) in group]
        vs = [r for r in vertical if id(r) in group]
        xs = _merge([r.at for r in vs] + [min(r.start for r in hs), max(r.end for r in hs)] if hs else [])
        ys = _merge([r.at for r in hs] + [r.start for r in vs] + [r.end for r in vs])
        if len(xs) >= 3 and len(ys) >= 3:
            grids.append((xs, ys, hs, vs))
    return grids


def _connected(horizontal: list[_Rule], vertical: list[_Rule]) -> list[set[int]]:
    """Rules that touch, in groups: one group is one table."""
    groups: list[set[int]] = []
    for v in vertical:
        touching = {
            id(h)
            for h in horizontal
            if h.start - RULE_TOLERANCE <= v.at <= h.end + RULE_TOLERANCE
            and v.start - RULE_TOLERANCE <= h.at <= v.end + RULE_TOLERANCE
        }
        if not touching:
            continue
        members = touching | {id(v)}
        joined = [g for g in groups if g & members]
        for g in joined:
            members |= g
            groups.remove(g)
        groups.append(members)
    return groups


def _merge(values: list[float]) -> list[float]:
    out: list[float] = []
    for value in sorted(values):
        if out and value - out[-1] <= RULE_TOLERANCE * 2:
            out[-1] = max(out[-1], value)
        else:
            out.append(value)
    return out


def scanned_tables(page: pymupdf.Page, languages: str, words: Sequence[OcrWord], dpi: int = 300) -> list[Table]:
    """Ruled fault tables on a scanned page, each cell OCR'd by itself. A cell that spans
    several rows (no rule crosses its column there) is read once, in its first row. `words`:
    the page's own OCR, which tells the grids that cannot be fault tables (a drawing's frame, a
    parts list) before their cells are read: on the development corpus's scans, reading cells
    took 18.8 CPU-s, 14.8 of them on pages whose grids were no fault tables, and takes 7.3 now."""
    image = grayscale(page, dpi)
    to_points = pymupdf.Matrix(72 / dpi, 72 / dpi) * page.derotation_matrix
    tables = []
    for xs, ys, horizontal, _ in _grid(image):
        cells: list[tuple[int, int, tuple[int, int, int, int]]] = []
        for column, (left, right) in enumerate(itertools.pairwise(xs)):
            middle = (left + right) / 2
            # This column's row edges: the rules that cross it, and the grid's top and bottom.
            edges = _merge([ys[0], ys[-1], *(h.at for h in horizontal if h.start <= middle <= h.end)])
            for top, bottom in itertools.pairwise(edges):
                row = row_of(ys, top)
                box = (int(left) + CELL_INSET, int(top) + CELL_INSET, int(right) - CELL_INSET, int(bottom))
                if box[2] > box[0] and box[3] > box[1]:
                    cells.append((row, column, box))
        if not _may_hold_faults(_words_in_cells(cells, words, ~to_points)):
            continue
        inked = [c for c in cells if (image[c[2][1] : c[2][3], c[2][0] : c[2][2]] < DARK).mean() >= MIN_INK]
        texts = ocr_cells([image[y0:y1, x0:x1] for _, _, (x0, y0, x1, y1) in inked], languages, dpi)
        rows = [["" for _ in xs[1:]] for _ in ys[1:]]
        for (row, column, _), text in zip(inked, texts):
            rows[row][column] = text
        used = [i for i, row in enumerate(rows) if any(cell.strip() for cell in row)]
        rows = [rows[i] for i in used]
        row_boxes = [tuple(pymupdf.Rect(xs[0], ys[i], xs[-1], ys[i + 1]) * to_points) for i in used]
        if len(rows) >= 2 and _has_code_column(rows):
            box = pymupdf.Rect(xs[0], ys[0], xs[-1], ys[-1]) * to_points
            tables.append(
                Table(
                    rows=rows,
                    row_boxes=[(b[0], b[1], b[2], b[3]) for b in row_boxes],
                    bbox=(box.x0, box.y0, box.x1, box.y1),
                )
            )
    return tables


def _words_in_cells(
    cells: list[tuple[int, int, tuple[int, int, int, int]]], words: Sequence[OcrWord], to_pixels: pymupdf.Matrix
) -> list[list[str]]:
    """The grid's rows as the page's OCR read them: each word in the cell its centre lies in."""
    found: dict[tuple[int, int], list[str]] = {}
    for text, (x0, y0, x1, y1) in words:
        centre = pymupdf.Point((x0 + x1) / 2, (y0 + y1) / 2) * to_pixels
        for row, column, (left, top, right, bottom) in cells:
            if left <= centre.x <= right and top <= centre.y <= bottom:
                found.setdefault((row, column), []).append(text)
                break
    width = 1 + max((column for _, column, _ in cells), default=0)
    return [
        [" ".join(found.get((row, column), [])) for column in range(width)] for row in sorted({row for row, _ in found})
    ]


def _may_hold_faults(rows: list[list[str]]) -> bool:
    """Whether a grid read by the page's OCR may be a fault table, leniently (that OCR reads a cell
    worse than the cell's own, and only a grid kept by `_has_code_column` is worth reading cell by
    cell): a code column named in its first rows, or codes in a quarter of the rows of a column."""
    if len(rows) < 2:
        return False
    if any("code" in column_roles(row).values() for row in rows[:3]):
        return True
    return _codes_in_a_column(rows, max(MIN_CODED_ROWS, len(rows) / 4))


def row_of(ys: Sequence[float], top: float) -> int:
    """The grid row a cell starts in. A rule that crosses only the cell's column can start it inside a
    row of the grid (a cell split in two), its last row too: the row is the last that starts above it."""
    return max(i for i, y in enumerate(ys[:-1]) if i == 0 or y <= top + RULE_TOLERANCE)


def _has_code_column(rows: list[list[str]]) -> bool:
    """A header with a code column among the first rows, or a column where most cells are codes."""
    if any(fault_header(row) for row in rows[:3]):
        return True
    return _codes_in_a_column(rows, 0.5 * len(rows))


def _codes_in_a_column(rows: list[list[str]], least: float) -> bool:
    """Whether some column holds a code in at least `least` of the rows."""
    return any(sum(parse_code_cell(row[i]) is not None for row in rows) >= least for i in range(len(rows[0])))
