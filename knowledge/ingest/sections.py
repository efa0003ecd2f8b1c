"""Fault sections: the pages under a fault / alarm / trip / error / protection / troubleshooting / FAQ
heading (故障, 报警, 异常, 保护, 出错, 常见问题; Fehler, Störungen: each language's words in `languages.py`), up to the next heading of the same rank
about something else, and any page that pairs causes with remedies, or a fault code column with either.

Only these pages are searched for fault tables and bare-number codes: elsewhere a manual's
numbers are parameters, page references and part numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from knowledge.ingest.languages import every
from knowledge.text import CJK, join_lines

if TYPE_CHECKING:
    from knowledge.ingest.pdf import Block, Page

# The words of every language a manual comes in (`languages.py`).
FAULT_WORDS = every("headings")
# A page that pairs causes with remedies is a troubleshooting table wherever it sits (a scanned
# manual's headings are unreadable; a quick guide's table has none).
_CAUSE = every("page_causes")
_REMEDY = every("page_remedies")
_CODES = every("page_codes")
_NUMBERED = re.compile(r"^\s*(?:\d{1,2}(?:\.\d{1,2}){0,3}\.?|第\s*[一二三四五六七八九十\d]{1,3}\s*[章节])\s*\S")
_TOC_LEADER = re.compile(r"(?:\.\s*){4,}\d*\s*$|…{2,}")
MAX_HEADING_WIDTH = 80
FALLBACK_MENTIONS = 3


@dataclass(frozen=True)
class Heading:
    page: int
    text: str
    size: float
    fault: bool


@dataclass
class FaultSections:
    pages: set[int] = field(default_factory=set)
    count: int = 0
    opening: dict[int, str] = field(default_factory=dict)  # page → the heading in force where it begins
    on_page: dict[int, list[str]] = field(default_factory=dict)  # page → the headings printed on it, in order


def headings(pages: list[Page], body_size: float) -> list[Heading]:
    found = []
    for page in pages:
        for block in page.blocks:
            text = join_lines(block.text)
            if _is_heading(block, text, body_size):
                found.append(Heading(page.number, text, block.size, bool(FAULT_WORDS.search(text))))
    return found


def fault_pages(pages: list[Page], body_size: float) -> FaultSections:
    result = FaultSections()
    found = headings(pages, body_size)
    current: Heading | None = None
    last_page = pages[-1].number if pages else 0
    for heading in [*found, Heading(last_page + 1, "", float("inf"), False)]:
        if current is not None and not heading.fault and heading.size >= current.size - 0.5:
            result.pages.update(range(current.page, heading.page + (heading.page <= last_page)))
            current = None
        if heading.fault and (current is None or heading.size > current.size + 0.5):
            if current is not None:  # a bigger fault heading: the smaller one was part of it
                result.pages.update(range(current.page, heading.page + 1))
            current = heading
            result.count += 1
    if not result.count:
        # No heading says "faults" (a scanned manual, an alarm list without a title): pages
        # that keep talking about faults are taken instead.
        result.pages = {page.number for page in pages if len(FAULT_WORDS.findall(page.text)) >= FALLBACK_MENTIONS}
    result.pages |= {page.number for page in pages if _pairs_faults(page.text)}
    section = ""
    for page in pages:
        result.opening[page.number] = section
        result.on_page[page.number] = [h.text for h in found if h.page == page.number]
        section = (result.on_page[page.number] or [section])[-1]
    return result


def _pairs_faults(text: str) -> bool:
    """A troubleshooting table's page: it names causes and remedies, or a fault code column beside either."""
    causes, remedies = bool(_CAUSE.search(text)), bool(_REMEDY.search(text))
    return (causes and remedies) or ((causes or remedies) and bool(_CODES.search(text)))


def _is_heading(block: Block, text: str, body_size: float) -> bool:
    width = len(text) + len(CJK.findall(text))  # a CJK character is as wide as two letters
    if not text or width > MAX_HEADING_WIDTH or block.text.count("\n") > 1 or _TOC_LEADER.search(text):
        return False
    if text.rstrip().endswith(("。", "；", ";", ",", "，", ":", "：")):
        return False  # a sentence or the lead-in of a list, however it is set
    emphasized = block.bold or block.size >= body_size + 1.0
    return emphasized or bool(_NUMBERED.match(text) and width <= MAX_HEADING_WIDTH // 2)
