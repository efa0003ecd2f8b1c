"""Hazard statements: the DANGER / WARNING / CAUTION (危险 / 警告 / 注意) texts a manual prints in
its safety chapter and beside its procedures, found at index time so an answer that sends a
technician to open a cover can give the manual's own warnings first.

A statement is a block led by a signal word ("DANGER — …", "Warning: …", a "WARNING" line above
its text, 危险！…), or a hazard sentence marked by a small pictogram beside it (an image or a drawn
triangle) without a word. Each is *general* (a safety chapter, the opening pages, a framed panel,
a pictogram) or belongs to the fault entries it is printed in, or else on the page of.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.codes import code_key
from knowledge.ingest.sections import Heading, headings
from knowledge.models import FaultRecord, Placement, SafetyStatement, Signal
from knowledge.text import join_lines

if TYPE_CHECKING:  # the manual tool reads statements without loading PyMuPDF
    import pymupdf

    from knowledge.ingest.pdf import Block, Page

# NOTICE is left out: the ANSI/ISO signal word for damage to property, not to the person.
SIGNAL_WORDS: dict[str, Signal] = {
    "danger": "danger",
    "warning": "warning",
    "caution": "caution",
    "危险": "danger",
    "警告": "warning",
    "注意": "caution",
    "小心": "caution",
}
SEVERITY: dict[Signal, int] = {"danger": 0, "warning": 1, "caution": 2}
# The word leads its block and is set apart: by a colon, a dash or an exclamation mark, or alone on
# its line. "Overheat warning", "Warning lamp is on", 注意事项 are no statements.
_LEAD = re.compile(
    r"^[\W_]*(?P<word>danger|warning|caution|危险|警告|注意|小心)(?:\s*[:：!！—–]+\s*|\s+-\s+|\s*$)",
    re.I,
)
_SENTENCE_END = (".", "。", "!", "！", ":", "：", ";", "；", "?", "？")
# What starts another unit of a page after a sentence: a step number, a bullet, a short "Label:".
_UNIT = re.compile(
    r"\s*(?:\d{1,2}\s*[.)．、]|[a-hA-H][.)）]\s|[①-⑩•▪■●◆]|[^\s:：]{1,15}(?:\s[^\s:：]{1,15}){0,2}\s*[:：])"
)
# 注意 also means "note": it signals a hazard only when the text names one.
_AMBIGUOUS = frozenset({"注意"})
ELECTRICAL = re.compile(
    r"\b(?:volt(?:age|ages|s)?|high[- ]voltage|dc[- ]?(?:bus|link)|capacitors?|power[- ]?(?:off|down)|"
    r"switch(?:ed|ing)?\s+(?:it\s+|the\s+\w+\s+)?off|disconnect\w*\s+(?:the\s+)?(?:power|mains|supply)|"
    r"isolat\w*|lock[- ]?out|tag[- ]?out|de-?energi[sz]\w*|energi[sz]ed|live\s+(?:parts?|terminals?|wires?)|"
    r"electric(?:al)?\s+shock|electrocut\w*|mains)\b|\d\s?(?:k?V|VAC|VDC)\b|"
    r"电压|高压|断电|停电|电容|触电|电击|带电|母线|切断电源|断开电源|漏电",
    re.I,
)
# What a pictogram or an ambiguous word must be beside to be a hazard: harm to the person.
HAZARD = re.compile(
    ELECTRICAL.pattern + r"|\b(?:injur\w*|death|fatal|kill\w*|burns?|scald\w*|hot\s+surfaces?|crush\w*|"
    r"amputat\w*|pinch\w*|entangl\w*|pressuri[sz]ed|explo\w+|fire|toxic|hazard\w*)\b|"
    r"受伤|伤害|死亡|烫伤|灼伤|高温|挤压|夹伤|危险|爆炸|火灾|有毒",
    re.I,
)
# Remedy steps that put hands on the machine (the manual's electrical statements then apply):
# parts replaced or opened, wiring, measuring, fastening. Reading a value or resetting is not.
HANDS_ON = re.compile(
    r"\b(?:replac\w*|repair\w*|open(?:s|ing)?|remov\w*|dismantl\w*|disassembl\w*|install\w*|mount\w*|"
    r"tighten\w*|loosen\w*|measur\w*|wir(?:e|es|ing)|cables?|connectors?|plugs?|terminals?|solder\w*|"
    r"insulation)\b|更换|拆|打开|测量|拧紧|紧固|松开|接线|电缆|插头|端子|安装|绝缘",
    re.I,
)
_SAFETY_HEADING = re.compile(
    r"^[\W\d.]*(?:chapter\s+\d+\s*|第\s*\S{1,3}\s*章\s*)?"
    r"(?:(?:general\s+|important\s+|for\s+your\s+)?safety(?:\s+(?:instructions?|notes?|information|precautions?|"
    r"regulations?|rules|guidelines|warnings?|notices?|summary))?|(?:safety\s+)?precautions?|hazards?|"
    r"warnings?\s+and\s+cautions?|安全(?:须知|注意事项|说明|信息|规范|警告|事项|指南|操作规程)?|注意事项)\W*$",
    re.I,
)
# Front matter (a cover's safety summary) sits on the first pages.
OPENING_PAGES = 2
PER_ENTRY = 3
# Geometry, in PDF points. A frame's edge lies within FRAME_GAP of the text it surrounds; a rule is
# a drawing thinner than RULE; a pictogram is a roughly square graphic of ICON points a side, at most
# BESIDE from the text's edge.
FRAME_GAP = 15.0
RULE = 2.0
ICON = (6.0, 60.0)
BESIDE = 40.0
_Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Printed:
    """A statement as a page's text shows it: the (block, line) pairs it spans, indices into the
    page's blocks and their lines (PyMuPDF often sets a paragraph in the block of the one before)."""

    lines: tuple[tuple[int, int], ...]
    signal: Signal
    label: str  # the signal word as printed; empty beside a pictogram
    text: str

    @property
    def blocks(self) -> list[int]:
        return sorted({block for block, _ in self.lines})


def signal_statements(blocks: Sequence[Block]) -> list[Printed]:
    """Statements led by a signal word, each up to the next unit of the page (a label, a step, another
    signal word); a word alone at the end of its block takes the next block. From the text alone, so
    entry assembly can keep statements out of an entry's cause and steps."""
    lines = [unicodedata.normalize("NFKC", block.text).splitlines() for block in blocks]
    found: list[Printed] = []
    taken: set[tuple[int, int]] = set()
    for b, block_lines in enumerate(lines):
        for n, line in enumerate(block_lines):
            lead = _LEAD.match(line)
            if lead is None or (b, n) in taken:
                continue
            span = [(b, n), *_run(block_lines, n + 1, b)]
            parts = [line[lead.end() :]] + [block_lines[i] for _, i in span[1:]]
            alone = not join_lines("\n".join(parts)) and len(span) == len(block_lines) - n
            if alone and b + 1 < len(lines) and lines[b + 1] and not _LEAD.match(lines[b + 1][0]):
                following = _run(lines[b + 1], 0, b + 1)
                span += following
                parts += [lines[b + 1][i] for _, i in following]
            text = join_lines("\n".join(parts))
            word = lead.group("word")
            if not text or (word in _AMBIGUOUS and not HAZARD.search(text)):
                continue
            taken.update(span)
            found.append(Printed(tuple(span), SIGNAL_WORDS[word.lower()], word, text))
    return found


def _run(lines: list[str], start: int, block: int) -> list[tuple[int, int]]:
    """The lines from `start` that carry a statement on: up to a sentence's end followed by the start
    of another unit."""
    run: list[tuple[int, int]] = []
    for n in range(start, len(lines)):
        if n > 0 and lines[n - 1].rstrip().endswith(_SENTENCE_END) and (_UNIT.match(lines[n]) or _LEAD.match(lines[n])):
            break
        run.append((block, n))
    return run


def find_statements(
    path: Path, pages: list[Page], body_size: float, records: list[FaultRecord]
) -> list[SafetyStatement]:
    """Every hazard statement of a manual, in page order. `path` is the PDF the pages were read from:
    frames and pictograms are drawings, not text."""
    chapter = _chapter_blocks(pages, body_size)
    found: list[SafetyStatement] = []
    with _Geometry(path) as geometry:
        for page in pages:
            printed = signal_statements(page.blocks)
            used = {i for statement in printed for i in statement.blocks}
            hazards = [i for i, block in enumerate(page.blocks) if i not in used and HAZARD.search(block.text)]
            if not printed and not hazards:
                continue
            # OCR'd blocks carry the scan's boxes; its frames and pictograms are pixels.
            shapes = _Shapes([], []) if page.ocr else geometry.page(page.number)
            printed += [
                Printed(
                    tuple((i, n) for n in range(len(page.blocks[i].text.splitlines()))),
                    "warning",  # ISO 7010's general warning sign: a hazard without a word for its degree
                    "",
                    join_lines(unicodedata.normalize("NFKC", page.blocks[i].text)),
                )
                for i in hazards
                if shapes.pictogram_beside(page.blocks[i].bbox)
            ]
            for statement in sorted(printed, key=lambda s: s.lines):
                box = _union([page.blocks[i].bbox for i in statement.blocks])
                found.append(
                    _placed(statement, page.number, box, (page.number, statement.blocks[0]) in chapter, shapes, records)
                )
    return found


def _placed(
    statement: Printed, page: int, box: _Box, in_chapter: bool, shapes: _Shapes, records: list[FaultRecord]
) -> SafetyStatement:
    """Where a statement belongs, the most specific first: the entry it is printed in, then the places
    that make it general, then the entries on its page."""
    placement: Placement
    inside = [r.code for r in records if any(p == page and _contains(b, _centre(box)) for p, *b in r.boxes)]
    on_page = [r.code for r in records if any(p == page for p, *_ in r.boxes)]
    codes: list[str] = []
    if inside:
        placement, codes = "entry", inside
    elif in_chapter:
        placement = "chapter"
    elif page <= OPENING_PAGES:
        placement = "opening"
    elif shapes.framed(box):
        placement = "panel"
    elif not statement.label or shapes.pictogram_beside(box):
        placement = "pictogram"
    elif on_page:
        placement, codes = "page", on_page
    else:
        placement = "text"
    return SafetyStatement(
        signal_word=statement.signal,
        label=statement.label,
        text=statement.text,
        page=page,
        general=not codes,
        electrical=bool(ELECTRICAL.search(statement.text)),
        placement=placement,
        codes=codes,
    )


def _chapter_blocks(pages: list[Page], body_size: float) -> set[tuple[int, int]]:
    """(page, block index) of every block under a safety heading, up to the next heading of its rank."""
    by_page: dict[int, dict[str, Heading]] = {}
    for heading in headings(pages, body_size):
        if not _LEAD.match(heading.text):  # a signal word set as a heading heads a panel, not a chapter
            by_page.setdefault(heading.page, {})[heading.text] = heading
    inside: set[tuple[int, int]] = set()
    level: float | None = None
    for page in pages:
        on_page = by_page.get(page.number, {})
        for index, block in enumerate(page.blocks):
            found = on_page.get(join_lines(block.text))
            if found is not None:
                if not found.fault and _SAFETY_HEADING.match(found.text):
                    level = found.size
                elif level is not None and found.size >= level - 0.5:
                    level = None
            if level is not None:
                inside.add((page.number, index))
    return inside


@dataclass
class _Shapes:
    segments: list[tuple[float, float, float, float]]  # rules and rectangle edges, (x0, y0, x1, y1)
    icons: list[_Box]

    def framed(self, box: _Box) -> bool:
        """A drawn rectangle around the text: a rule close to each of its four sides, along most of it."""
        x0, y0, x1, y1 = box
        width, height = x1 - x0, y1 - y0

        def along(a0: float, a1: float, b0: float, b1: float, length: float) -> bool:
            return min(a1, b1) - max(a0, b0) >= 0.8 * length

        horizontal = [s for s in self.segments if s[3] - s[1] <= RULE]
        vertical = [s for s in self.segments if s[2] - s[0] <= RULE]
        return (
            any(y0 - FRAME_GAP <= s[1] <= y0 + 1 and along(s[0], s[2], x0, x1, width) for s in horizontal)
            and any(y1 - 1 <= s[3] <= y1 + FRAME_GAP and along(s[0], s[2], x0, x1, width) for s in horizontal)
            and any(x0 - FRAME_GAP <= s[0] <= x0 + 1 and along(s[1], s[3], y0, y1, height) for s in vertical)
            and any(x1 - 1 <= s[2] <= x1 + FRAME_GAP and along(s[1], s[3], y0, y1, height) for s in vertical)
        )

    def pictogram_beside(self, box: _Box) -> bool:
        x0, y0, x1, y1 = box
        return any(
            min(y1, i[3]) - max(y0, i[1]) > 0 and (0 <= x0 - i[2] <= BESIDE or 0 <= i[0] - x1 <= BESIDE)
            for i in self.icons
        )


class _Geometry:
    """A manual's drawings and images, read only for the pages asked about."""

    def __init__(self, path: Path):
        self._path = path
        self._doc: pymupdf.Document | None = None

    def __enter__(self) -> _Geometry:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._doc is not None:
            self._doc.close()

    def page(self, number: int) -> _Shapes:
        import pymupdf

        if self._doc is None:
            self._doc = pymupdf.open(self._path)
        page = self._doc[number - 1]
        segments: list[tuple[float, float, float, float]] = []
        icons: list[_Box] = []
        # The C drawings, plain tuples: `get_drawings` makes the same numbers into Point, Rect and
        # Quad objects, which cost three times the drawing extraction itself.
        for drawing in page.get_cdrawings():
            x0, y0, x1, y1 = drawing["rect"]
            if _icon_sized(max(0.0, x1 - x0), max(0.0, y1 - y0)):
                icons.append((x0, y0, x1, y1))
            for item in drawing["items"]:
                if item[0] == "l":
                    (ax, ay), (bx, by) = item[1], item[2]
                    segments.append((min(ax, bx), min(ay, by), max(ax, bx), max(ay, by)))
                elif item[0] in ("re", "qu"):
                    if item[0] == "qu":
                        xs, ys = [p[0] for p in item[1]], [p[1] for p in item[1]]
                        r = (min(xs), min(ys), max(xs), max(ys))
                    else:
                        a0, b0, a1, b1 = item[1]
                        r = (min(a0, a1), min(b0, b1), max(a0, a1), max(b0, b1))
                    if min(r[2] - r[0], r[3] - r[1]) <= RULE:
                        segments.append(r)
                    else:
                        segments += [
                            (r[0], r[1], r[2], r[1]),
                            (r[0], r[3], r[2], r[3]),
                            (r[0], r[1], r[0], r[3]),
                            (r[2], r[1], r[2], r[3]),
                        ]
        for image in page.get_image_info():
            x0, y0, x1, y1 = image["bbox"]
            if _icon_sized(x1 - x0, y1 - y0):
                icons.append((x0, y0, x1, y1))
        return _Shapes(segments, icons)


def _icon_sized(width: float, height: float) -> bool:
    return (
        ICON[0] <= min(width, height) and max(width, height) <= ICON[1] and max(width, height) <= 2 * min(width, height)
    )


def _union(boxes: list[tuple[float, float, float, float]]) -> _Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _centre(box: _Box) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)


def _contains(box: Sequence[float], point: tuple[float, float]) -> bool:
    return box[0] - 1 <= point[0] <= box[2] + 1 and box[1] - 1 <= point[1] <= box[3] + 1


def hands_on(steps: Sequence[str]) -> bool:
    """Whether a remedy has the technician open, replace, wire or measure something."""
    return any(HANDS_ON.search(step) for step in steps)


def for_entry(
    statements: Sequence[SafetyStatement], code: str, steps: Sequence[str], limit: int = PER_ENTRY
) -> list[SafetyStatement]:
    """What applies to a fault entry: its own statements, then, when its remedy is hands-on, the
    manual's general electrical ones, the most severe first; at most `limit`, no text twice."""
    key = code_key(code)
    own = [s for s in statements if key in {code_key(c) for c in s.codes}]
    electrical = (
        sorted((s for s in statements if s.general and s.electrical), key=lambda s: (SEVERITY[s.signal_word], s.page))
        if hands_on(steps)
        else []
    )
    chosen: list[SafetyStatement] = []
    for statement in [*sorted(own, key=lambda s: SEVERITY[s.signal_word]), *electrical]:
        if len(chosen) < limit and all(statement.text != c.text for c in chosen):
            chosen.append(statement)
    return chosen


def read_statements(conn: sqlite3.Connection, manual_sha256: str) -> list[SafetyStatement]:
    """A manual's statements as indexed, in page order; none from an index built before they were kept."""
    try:
        rows = conn.execute(
            "SELECT signal_word, label, text, page, general, electrical, placement, codes FROM safety"
            " WHERE manual_sha256 = ? ORDER BY id",
            (manual_sha256,),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [
        SafetyStatement(
            signal_word=row[0],
            label=row[1],
            text=row[2],
            page=row[3],
            general=bool(row[4]),
            electrical=bool(row[5]),
            placement=row[6],
            codes=json.loads(row[7]),
        )
        for row in rows
    ]
