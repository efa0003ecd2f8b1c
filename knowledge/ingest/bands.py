"""Running headers and footers: text repeated in the top or bottom band of most pages.

Field manuals print the manual title, version, page numbers and hotline
notes (often quoting fault codes) on every page; indexed as content they
drown keyword search. A block is a band block when its text, with digits
masked, recurs in the same band on at least half of the pages.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

BAND_SHARE = 0.12  # how far into the page a header or footer may reach
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class PositionedText:
    page: int
    text: str
    y0: float
    y1: float
    page_height: float


@dataclass(frozen=True)
class Bands:
    """Content lies strictly between `top` and `bottom` (fractions of the page height)."""

    top: float = 0.0
    bottom: float = 1.0
    texts: list[str] = field(default_factory=list)
    keys: frozenset[tuple[str, str]] = frozenset()

    def contains(self, block: PositionedText) -> bool:
        zone = _zone(block)
        if zone and (zone, _key(block.text)) in self.keys:
            return True
        return block.y1 / block.page_height <= self.top + 1e-6 or block.y0 / block.page_height >= self.bottom - 1e-6


def find_bands(blocks: list[PositionedText], page_count: int) -> Bands:
    if page_count < 2:
        return Bands()
    pages_by_key: dict[tuple[str, str], set[int]] = defaultdict(set)
    for block in blocks:
        zone = _zone(block)
        if zone:
            pages_by_key[(zone, _key(block.text))].add(block.page)
    needed = max(2, math.ceil(page_count / 2))
    repeated = {key for key, pages in pages_by_key.items() if len(pages) >= needed}
    top, bottom, texts = 0.0, 1.0, []
    seen: set[tuple[str, str]] = set()
    for block in blocks:
        zone = _zone(block)
        key = (zone, _key(block.text)) if zone else None
        if key not in repeated:
            continue
        if zone == "top":
            top = max(top, block.y1 / block.page_height)
        else:
            bottom = min(bottom, block.y0 / block.page_height)
        if key not in seen:
            seen.add(key)
            texts.append(block.text)
    return Bands(top=top, bottom=bottom, texts=texts, keys=frozenset(repeated))


def _zone(block: PositionedText) -> str | None:
    if block.y1 / block.page_height <= BAND_SHARE:
        return "top"
    if block.y0 / block.page_height >= 1 - BAND_SHARE:
        return "bottom"
    return None


def _key(text: str) -> str:
    return " ".join(_DIGITS.sub("#", text.lower()).split())
