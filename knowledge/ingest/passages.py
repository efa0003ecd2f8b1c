"""Page passages: every page of every manual, cut into pieces an embedding model reads whole,
so a question lands on the right page even when no structured entry was extracted there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from knowledge.ingest.languages import detect
from knowledge.text import CJK, join_lines

if TYPE_CHECKING:
    from knowledge.ingest.pdf import Page
    from knowledge.ingest.sections import FaultSections

# Passage size in words (a CJK character counts as one): a paragraph or two, so a hit points at
# the lines that matched. The embedding model reads a passage's first 64 word pieces, so on a
# fault-section page, where symptoms are described, passages are as short as that: all of
# their text is compared by meaning.
MAX_WIDTH = 110
FAULT_WIDTH = 45
# Outside fault sections, and on pages whose fault entries were extracted, a page is embedded by
# its opening passages (heading, what the page is about); every passage of any other fault-section
# page is: that is where symptoms are described in prose. So is every passage of an OCR'd page: a scan
# seldom gives the headings that make a fault section, and OCR's misread words lose its troubleshooting
# table to a search by words (held-out sets 4-7, scanned questions at rank 1: +0.13, +0.25, 0, 0 unscoped).
EMBEDDED_PER_PAGE = 2


@dataclass(frozen=True)
class Passage:
    page: int
    section: str
    text: str
    ocr: bool
    fault: bool
    embedded: bool  # searched by meaning too (else by words only)
    language: str  # its own text's, else its page's


def page_passages(
    pages: list[Page], sections: FaultSections, entry_pages: set[int], languages: dict[int, str], told: bool = True
) -> list[Passage]:
    """A heading printed on a page starts a passage and names the passages after it; above it,
    the page is still under the heading in force where the page begins. `entry_pages`: pages
    that gave fault entries, which carry their meaning (the page is still searched by words).
    `languages`: each page's; a passage is told by its own text where `told` (a bilingual page holds both),
    else it is in its page's (the operator said which)."""
    out: list[Passage] = []
    for page in pages:
        fault = page.number in sections.pages
        described = fault and page.number not in entry_pages
        width = FAULT_WIDTH if fault else MAX_WIDTH
        headings = set(sections.on_page.get(page.number, ()))
        section = sections.opening.get(page.number, "")
        chunks: list[tuple[str, str]] = []  # (section, text)
        heading_only = False  # the last chunk holds headings and nothing under them yet
        for block in page.text_blocks:
            text = join_lines(block)
            if not text:
                continue
            if text in headings:
                section = text
                if heading_only:  # headings in a row (chapter, section) open one passage
                    chunks[-1] = (section, chunks[-1][1] + "\n" + text)
                else:
                    chunks.append((section, text))
                heading_only = True
                continue
            if heading_only:  # a heading stays with the text under it
                chunks[-1:] = [(section, piece) for piece in _split(chunks[-1][1] + "\n" + text, width)]
            elif chunks and chunks[-1][0] == section and _width(chunks[-1][1]) + _width(text) <= width * 1.2:
                chunks[-1] = (section, chunks[-1][1] + "\n" + text)
            else:
                chunks.extend((section, piece) for piece in _split(text, width))
            heading_only = False
        language = languages[page.number]
        out.extend(
            Passage(
                page.number,
                chunk_section,
                chunk,
                page.ocr,
                fault,
                embedded=described or page.ocr or n < EMBEDDED_PER_PAGE,
                language=detect(chunk, language) if told else language,
            )
            for n, (chunk_section, chunk) in enumerate(chunks)
        )
    return out


def _width(text: str) -> int:
    return len(text.split()) + len(CJK.findall(text))


def _split(text: str, width: int) -> list[str]:
    """A block longer than one passage, cut at sentence ends where possible."""
    if _width(text) <= width * 1.2:
        return [text]
    pieces, current = [], ""
    for sentence in re.split(r"(?<=[.。;；!?！？])\s*", text):
        if current and _width(current) + _width(sentence) > width:
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}".strip() if current else sentence
        while _width(current) > width * 1.5:  # no sentence end for a long way: cut by words
            words = current.split()
            pieces.append(" ".join(words[:width]) if len(words) > width else current[:width])
            current = " ".join(words[width:]) if len(words) > width else current[width:]
    if current:
        pieces.append(current)
    return pieces
