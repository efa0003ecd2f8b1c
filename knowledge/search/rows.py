"""A row of the index as a search reads it, and the answers rows group into.

A row is an entry (one fault code of one manual) or a page passage. A ranking counts each group once, by its
best row: per machine and code for entries, so the versions and language editions of one entry are one
answer; per manual page for passages, so a page's passages are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TypedDict

from knowledge.codes import scope_key
from knowledge.models import HitKind, Match, Scope


class IndexRow(TypedDict):
    """A row of the index's records with the file, title and validity of its manual, as the store reads them
    (JSON lists as stored: `steps`, `pages`; flags as 0 or 1)."""

    id: int
    kind: HitKind
    manual_sha256: str
    code: str
    code_key: str
    canonical_id: str
    title: str
    symptom: str
    cause: str
    steps: str
    snippet: str
    page: int
    pages: str
    ocr: int
    fault: int
    vendor: str
    model: str
    vendor_key: str
    model_key: str
    version: str
    language: str
    file: str
    manual_title: str
    valid_for: str


# What ranks count per: (vendor key, model key, code key) for an entry, ("page", manual, page) for a passage.
Group = tuple[str, str, str | int]
Ranked = list[tuple[IndexRow, float, Match]]
# A ranking: rows best first, each with its score (BM25 or cosine: higher is better, 0 is no match).
Scored = list[tuple[IndexRow, float]]
# A ranking as record ids, best first, each with its score.
Ranking = list[tuple[int, float]]


def group(row: IndexRow) -> Group:
    if row["kind"] == "page":
        return "page", row["manual_sha256"], row["page"]
    return row["vendor_key"], row["model_key"], row["code_key"]


def entry_pages(rows: Iterable[IndexRow]) -> dict[Group, set[tuple[str, int]]]:
    """Each entry group's pages in every manual (edition, version) it was extracted from."""
    pages: dict[Group, set[tuple[str, int]]] = {}
    for row in rows:
        if row["kind"] == "entry":
            pages.setdefault(group(row), set()).update(
                (row["manual_sha256"], page) for page in json.loads(row["pages"])
            )
    return pages


def page_rows(rows: Iterable[IndexRow]) -> dict[tuple[str, int], list[IndexRow]]:
    """Each manual page's passages, in page order."""
    pages: dict[tuple[str, int], list[IndexRow]] = {}
    for row in rows:
        if row["kind"] == "page":
            pages.setdefault((row["manual_sha256"], row["page"]), []).append(row)
    return pages


def in_scope(row: IndexRow, scope: Scope) -> bool:
    """A row of the scope's machine, or of no machine in particular."""
    return keeps(scope, row["vendor_key"], row["model_key"])


def keeps(scope: Scope, vendor_key: str, model_key: str) -> bool:
    """Whether a scope keeps a machine read as these keys ("" where the build read none)."""
    return (not scope.vendor or vendor_key in ("", scope_key(scope.vendor))) and (
        not scope.model or model_key in ("", scope_key(scope.model))
    )
