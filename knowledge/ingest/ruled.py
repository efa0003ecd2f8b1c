"""Ruled tables by PyMuPDF's table finder, run on one read of the page for both line strategies.

`page.find_tables` reads the page's characters and drawings afresh on every call, makes each character
a dict of two dozen fields (most of its time on a page of a parameter list) and, on a page stored
rotated, works out each table's header, which fixloop never reads. Here the finder's own steps
(`make_edges`, `TableFinder`) run on characters read once with only the fields they look at, and on
drawings read once for both strategies: on the 206 ruled pages of the development corpus's fault
sections the same tables as both strategies of `find_tables` give, in 26.9 CPU-s instead of 56.8. tests/test_knowledge_ruled.py holds the result to
`find_tables`'s, so a PyMuPDF upgrade that changes the finder's steps shows there.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pymupdf

finder = pymupdf.table  # the table finder's steps (PyMuPDF imports the module itself)

# The ruling lines alone, then every border (`ruled_tables`).
STRATEGIES = ("lines_strict", "lines")
MIN_TABLE_DRAWINGS = 4  # a ruled table has rules: a page with fewer drawings is not searched


def ruled_tables(page: pymupdf.Page, clip: pymupdf.Rect) -> list[Any]:
    """The ruled tables of a page that reach into its body (`clip`: the page without its running header
    and footer; a table's header row repeated on every page is taken for a running header, so tables are
    found on the whole page), in the coordinates of the page as displayed. Rows come from the ruling
    lines alone, not from the borders of shaded boxes, which often frame each printed line of an entry;
    where that finds nothing, from both. (On the 29 manuals of the development corpus the ruling lines
    alone read 614 entries, 11 of them empty, and every border 581, 132 empty; `docs/manual-search.md`.)
    The layout model `find_tables` can gate tables by is not run: it is for unruled tables, which
    knowledge.ingest.tables reads from the words, and costs ~0.2 s a page."""
    small_glyphs = bool(pymupdf.TOOLS.set_small_glyph_heights())
    pymupdf.TOOLS.set_small_glyph_heights(True)  # as find_tables: a glyph's box is its own height
    rotation = finder.page_rotation_set0(page) if page.rotation else None
    shown = rotation[0] if rotation else page
    try:
        drawings = shown.get_drawings()
        if len(drawings) < MIN_TABLE_DRAWINGS:
            return []
        shown._table_drawings_cache = [drawings]  # the finder's own cache, read for both strategies
        chars = _chars(shown)
        for strategy in STRATEGIES:
            found = [t for t in _tables(shown, chars, strategy) if pymupdf.Rect(t.bbox).intersects(clip)]
            if found:
                return found
        return []
    finally:
        shown.__dict__.pop("_table_drawings_cache", None)
        finder.CHARS.clear()
        finder.EDGES.clear()
        pymupdf.TOOLS.set_small_glyph_heights(small_glyphs)
        if rotation:
            finder.page_rotation_reset(*rotation)


def _tables(page: pymupdf.Page, chars: list[dict[str, Any]], strategy: str) -> list[Any]:
    settings = finder.TableSettings.resolve({"vertical_strategy": strategy, "horizontal_strategy": strategy})
    page.table_settings = settings
    finder.CHARS.clear()
    finder.CHARS.extend(chars)
    finder.EDGES.clear()
    finder.make_edges(page, tset=settings)
    return list(finder.TableFinder(page, settings=settings).tables)


def _chars(page: pymupdf.Page) -> list[dict[str, Any]]:
    """The characters as `make_chars` gives the line strategies what they read of them: the box
    (`x0`, `top`, `x1`, `bottom`), its height in PDF coordinates (`y0`, `y1`: the page is derotated,
    so the page's matrix only flips y; in single precision, as MuPDF computes it) and the text."""
    _, _, _, flip, _, shift = page.transformation_matrix
    textpage = page.get_textpage(flags=finder.FLAGS)
    glyphs = [
        char
        for block in page.get_text("rawdict", textpage=textpage)["blocks"]
        for line in block["lines"]
        for span in line["spans"]
        for char in span["chars"]
    ]
    if not glyphs:
        return []
    heights = np.asarray([g["bbox"][1::2] for g in glyphs], dtype=np.float32) * np.float32(flip) + np.float32(shift)
    return [
        {
            "x0": glyph["bbox"][0],
            "x1": glyph["bbox"][2],
            "top": glyph["bbox"][1],
            "bottom": glyph["bbox"][3],
            "y0": float(min(a, b)),
            "y1": float(max(a, b)),
            "text": glyph["c"],
        }
        for glyph, (a, b) in zip(glyphs, heights.tolist(), strict=True)
    ]
