"""Ranking the index's rows for a question: rankings fused by their scores, the priors that
tilt them, an entry taking over the page it came from, and the snippet a hit shows.

A row is an entry (one fault code of one manual) or a page passage. A ranking counts each
group once, by its best row: per machine and code for entries, so the versions and language
editions of one entry are one answer; per manual page for passages, so a page's passages are.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable
from typing import TypedDict

from knowledge.codes import MENTION
from knowledge.models import HitKind, Match
from knowledge.passages import code_terms
from knowledge.text import terms
from knowledge.tuning import Tuning

SNIPPET_CHARS = 280


class IndexRow(TypedDict):
    """A row of the index's records with the file, title and validity of its manual, as
    `ManualIndex` reads them (JSON lists as stored: `steps`, `pages`; flags as 0 or 1)."""

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
_FAULT_WORDS = re.compile(
    r"\b(?:fault|alarm|trip|error|err|warning|led|blink|flash|shows?|display)|故障|报警|异常|闪", re.I
)
# A token with a letter and a digit, a zero-padded number, or a display code: how codes are printed.
CODE_LIKE_WORD = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Za-z]+[.\-]?\d+|\d+[A-Za-z]+|0\d+|[A-Za-z]{1,4}[.\-][A-Za-z0-9]{2,})"
    r"(?![A-Za-z0-9])"
)


def fuse(
    own: list[tuple[Match, Scored]],
    cross: list[tuple[Match, Scored]],
    language: str,
    about_a_fault: bool,
    tuning: Tuning,
) -> Ranked:
    """The question's own rankings (words, meaning, printed codes) and the cross-language ones (weighted
    less) as one list of (row, score, how it matched), best first.

    A row's score is the weighted sum of its scores in the rankings, each divided by its ranking's best
    (a convex combination of normalised scores). Unlike reciprocal rank, which counts only places, it keeps
    how far ahead a ranking's first is: a row far closer in meaning than any other is not outvoted by rows
    a little above the middle of both rankings."""
    weights = {"lexical": 1.0, "semantic": tuning.semantic_weight}
    rankings = [(weights[how], how, _scaled(rows)) for how, rows in own]
    rankings += [(tuning.cross_weight * weights[how], how, _scaled(rows)) for how, rows in cross]
    rankings = [ranking for ranking in rankings if ranking[2]]
    total = sum(weight for weight, _, _ in rankings)
    rows: dict[Group, IndexRow] = {}
    for _, _, scores in rankings:  # an entry is represented by its row in the question's own rankings first
        for key, (row, _) in scores.items():
            rows.setdefault(key, row)
    ranked: Ranked = []
    for key, row in rows.items():
        votes = [(weight * scores[key][1], how) for weight, how, scores in rankings if key in scores]
        if row["kind"] == "entry":
            prior = tuning.entry_prior
        else:
            prior = tuning.fault_page_prior if row["fault"] and about_a_fault else 1.0
        prior *= tuning.language_prior if row["language"] == language else 1.0
        ranked.append((row, sum(vote for vote, _ in votes) / total * prior, max(votes)[1]))
    return sorted(ranked, key=lambda item: -item[1])


def entries_over_their_pages(ranked: Ranked, entry_pages: dict[Group, set[tuple[str, int]]]) -> Ranked:
    """A page that matched and an entry extracted from it (in any edition) are one answer, and
    the entry is the better one: it takes the page's score when that is higher, and the page
    leaves the list. `entry_pages`: each entry group's (manual, page) pairs."""
    best_entry: dict[tuple[str, int], int] = {}
    for position, (row, score, _) in enumerate(ranked):
        if row["kind"] == "entry":
            for key in entry_pages.get(group(row), ()):
                if key not in best_entry or ranked[best_entry[key]][1] < score:
                    best_entry[key] = position
    out = list(ranked)
    dropped = set()
    for position, (row, score, match) in enumerate(ranked):
        entry = best_entry.get((row["manual_sha256"], row["page"])) if row["kind"] == "page" else None
        if entry is not None:
            dropped.add(position)
            if score > out[entry][1]:
                out[entry] = (out[entry][0], score, match)
    return [item for position, item in enumerate(out) if position not in dropped]


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


def best_passage(passages: list[tuple[IndexRow, list[str]]], words: frozenset[str]) -> IndexRow:
    """The passage of a matched page that shares the most words (and neighbouring pairs of them)
    with the question: the page matched as a whole, but its answer may sit in a neighbouring
    passage (a table's row). `passages`: each with its index terms, the matched one first."""
    return max(passages, key=lambda item: len(words & {*item[1], *_pairs(item[1])}))[0]


# A snippet reads every line of its page, and a plant's questions come back to the same pages: their words are
# kept (at 50,000 rows, 3,000 of the bench's 3,700 line readings were of a line read before).
@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    found = terms(text)  # once: cutting Chinese lines into words is most of a snippet's time
    return frozenset((*found, *code_terms(text), *_pairs(found)))


def word_pairs(text: str) -> list[str]:
    """Neighbouring words as one term: the passage that says `red LED flashes 3` beats the one
    that says `red LED flashes a number of times` for `red LED flashes 3 times`."""
    return _pairs(terms(text))


def _pairs(words: list[str]) -> list[str]:
    return [f"{a} {b}" for a, b in itertools.pairwise(words)]


def snippet(row: IndexRow, words: frozenset[str]) -> str:
    """A page's passage from the line that shares the most words with the question (and the
    line before it, which often names the table or the fault); an entry's code, name and cause."""
    if row["kind"] == "page":
        lines = [line for line in row["snippet"].splitlines() if line.strip()] or [""]
        best = max(range(len(lines)), key=lambda i: len(words & _words(lines[i])))
        text = " ".join(" ".join(lines[max(0, best - 1) :]).split())
    else:
        text = " — ".join(part for part in (f"{row['code']} {row['title']}".strip(), row["cause"]) if part)
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def codes_or_fault_words(text: str) -> bool:
    return bool(MENTION.search(text) or _FAULT_WORDS.search(text))


def _scaled(rows: Scored) -> dict[Group, tuple[IndexRow, float]]:
    """Each group's first row and its score as a share of the ranking's best (0 to 1)."""
    best: dict[Group, tuple[IndexRow, float]] = {}
    for row, score in rows:
        best.setdefault(group(row), (row, max(score, 0.0)))
    top = max((score for _, score in best.values()), default=0.0)
    return {key: (row, score / top) for key, (row, score) in best.items()} if top > 0 else {}
