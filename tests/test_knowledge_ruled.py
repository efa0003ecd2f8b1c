"""Ruled tables read on one read of the page (knowledge.ingest.ruled) are PyMuPDF's `find_tables` tables: ruled
by lines, by shaded boxes alone (the second strategy), on a page stored rotated, and none beside a drawing."""

from __future__ import annotations

import itertools
from typing import Any

import pymupdf
import pytest

from knowledge.ingest.ruled import STRATEGIES, ruled_tables

ROWS = (("Code", "Name", "Remedy"), ("E11", "Motor overheating", "Clean the fan."), ("E12", "Oil low", "Top up oil."))
XS = (50, 110, 300, 540)


def _ruled(page: pymupdf.Page) -> None:
    for n, row in enumerate(ROWS):
        for x, text in zip(XS, row):
            page.insert_text((x + 4, 100 + 20 * n + 14), text, fontsize=10)
    for n in range(len(ROWS) + 1):
        page.draw_line((XS[0], 100 + 20 * n), (XS[-1], 100 + 20 * n))
    for x in XS:
        page.draw_line((x, 100), (x, 100 + 20 * len(ROWS)))


def _shaded(page: pymupdf.Page) -> None:
    """Cells as grey boxes and no rule: only every border makes a table."""
    for n, row in enumerate(ROWS):
        for (x0, x1), text in zip(itertools.pairwise(XS), row):
            page.draw_rect(pymupdf.Rect(x0, 100 + 20 * n, x1, 100 + 20 * (n + 1)), color=None, fill=(0.9, 0.9, 0.9))
            page.insert_text((x0 + 4, 100 + 20 * n + 14), text, fontsize=10)


def _drawing(page: pymupdf.Page) -> None:
    page.insert_text((60, 90), "Figure 3: the cooling circuit", fontsize=10)
    for n in range(5):
        page.draw_circle((150 + 60 * n, 200), 20)
        page.draw_line((170 + 60 * n, 200), (190 + 60 * n, 200))


def _found(tables: list[Any]) -> list[tuple[Any, ...]]:
    return [(tuple(t.bbox), tuple(tuple(row.cells) for row in t.rows)) for t in tables]


def _reference(page: pymupdf.Page, clip: pymupdf.Rect) -> list[tuple[Any, ...]]:
    for strategy in STRATEGIES:
        tables = page.find_tables(strategy=strategy, use_layout=False).tables
        found = [t for t in tables if pymupdf.Rect(t.bbox).intersects(clip)]
        if found:
            return _found(found)
    return []


@pytest.mark.parametrize(
    ("draw", "rotation", "tables"), [(_ruled, 0, 1), (_ruled, 90, 1), (_shaded, 0, 1), (_drawing, 0, 0)]
)
def test_the_tables_are_those_find_tables_finds(draw: Any, rotation: int, tables: int) -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    draw(page)
    page.set_rotation(rotation)
    clip = pymupdf.Rect(0, 50, page.rect.width, page.rect.height - 50)
    expected = _reference(page, clip)
    assert len(expected) == tables
    assert _found(ruled_tables(page, clip)) == expected
    assert page.rotation == rotation  # the page is put back as it was stored
