"""What a search answers: ranked rows collapsed into hits, and every message a technician reads.

One hit per machine and code: the asked-for (or newest) manual version in the asker's language, with a note on
how the other versions differ. A page's hit shows the passage, and the lines of it, that share the most words
with the question.
"""

from __future__ import annotations

import functools
import json

from knowledge.codes import code_terms
from knowledge.ingest.metadata import normalize_version, version_order
from knowledge.models import Hit, Match, Scope, SearchResult
from knowledge.search.rows import Group, IndexRow, Ranked, group, in_scope
from knowledge.search.store import Snapshot
from knowledge.text import terms, word_pairs
from knowledge.tuning import Tuning


def collapse(
    snap: Snapshot,
    ranked: Ranked,
    scope: Scope,
    version: str | None,
    language: str,
    k: int,
    tuning: Tuning,
    words: frozenset[str] = frozenset(),
) -> list[Hit]:
    """One hit per machine and code: the asked-for (or newest) version, in the asker's language. `words`: the
    question's, which choose a page's passage and snippet."""
    wanted = normalize_version(version) if version else ""
    groups: dict[Group, Ranked] = {}
    for item in ranked:
        groups.setdefault(group(item[0]), []).append(item)
    hits: list[Hit] = []
    covered: set[tuple[str, int]] = set()
    for items in groups.values():
        row = items[0][0]
        if row["kind"] == "page":
            if (row["manual_sha256"], row["page"]) in covered:
                continue  # the entry above already cites this page
            hits.append(_hit(snap, row, [row], scope, items[0][1], items[0][2], tuning, words))
            if len(hits) == k:
                break
            continue
        siblings = snap.siblings(row)
        candidates = [r for r in siblings if r["version"] == wanted] if wanted else siblings
        if not candidates:
            continue
        newest = max(version_order(r["version"]) for r in candidates)
        candidates = [r for r in candidates if version_order(r["version"]) == newest]
        row = next((r for r in candidates if r["language"] == language), candidates[0])
        score, match = items[0][1], items[0][2]
        hits.append(_hit(snap, row, siblings, scope, score, match, tuning))
        covered.update((row["manual_sha256"], page) for page in json.loads(row["pages"]))
        if len(hits) == k:
            break
    return hits


def prefer(hits: list[Hit], mentioned: frozenset[str], language: str) -> list[Hit]:
    """Hits from the manuals the question names first (`EP100 err 9`, not alarm 9 of another drive), then those
    in the question's language (`23号报警` on the Chinese controller)."""
    return sorted(hits, key=lambda hit: (hit.manual_sha256 not in mentioned, hit.language != language))


def others_marked(hits: list[Hit], named: frozenset[str]) -> list[Hit]:
    """Hits from manuals other than those the question names (sha256) marked as not the asked machine's: a
    sibling's meaning of the same code is no answer for the named one."""
    if not named:
        return hits
    return [hit if hit.manual_sha256 in named else hit.model_copy(update={"applies_to_device": False}) for hit in hits]


# -- messages ----------------------------------------------------------------


def code_answer(code: str, hits: list[Hit], match: Match, elsewhere: str = "") -> SearchResult:
    """A code's entries, saying how they were found when that was not as typed, or (`elsewhere`: the manuals of
    the machine asked about, which do not list it) not found there, with the other machines' entries that list it."""
    result = SearchResult(status="ok", hits=hits)
    # As the manuals print it: the code as typed may carry the words around it (`inverter E02`, `shows E07`).
    printed = ", ".join(dict.fromkeys(hit.fault_code for hit in hits))
    if match == "lookalike":
        result.message = (
            f"No code {code} is printed in the manuals; read as {printed} (padded, in another notation, or "
            "characters a 7-segment display shows alike)."
        )
        result.suggestion = f"Check that the HMI shows {printed}."
    if elsewhere:
        # Not found for the machine asked about: the hits say what the code means elsewhere, no answer here.
        result.status = "not_found"
        listing = list(dict.fromkeys(f"the {hit.manual_title or hit.manual} ({hit.scope})" for hit in hits))
        result.message = (
            f"Code {printed} is not in {elsewhere}; {', '.join(listing)} list{'s' if len(listing) == 1 else ''} it. "
            "These meanings belong to other machines."
        )
        result.suggestion = "Check the device and the code on the HMI before following another machine's steps."
    elif len({(h.vendor, h.model) for h in hits}) > 1:
        result.message = f"Code {printed} means different things on different machines; each hit names its scope."
        result.suggestion = "Give device_id to get the meaning for one machine."
    return result


def code_not_found(code: str, scope: Scope, near: list[str]) -> SearchResult:
    """No entry holds the code; `near`: codes as printed that it may have been meant as, nearest first."""
    where = f"the {scope_name(scope)} manuals" if scope.vendor or scope.model else "the indexed manuals"
    hint = f" Near codes: {', '.join(near)}." if near else ""
    return SearchResult(
        status="not_found",
        message=f"No entry for code {code!r} in {where}.{hint}",
        suggestion=(
            f"Check the code on the HMI{' (did you mean ' + near[0] + '?)' if near else ''}, "
            "or describe the symptom in `query` instead."
        ),
    )


def listed_elsewhere(code: str, names: list[str], found: SearchResult) -> SearchResult:
    """A code asked about a machine no manual is about, which only other machines' manuals list."""
    machines = ", ".join(dict.fromkeys(hit.scope for hit in found.hits))
    return SearchResult(
        status="not_found",
        message=f"No indexed manual is about {' '.join(names)}; code {code} is listed only for other machines ({machines}).",
        suggestion=f"Index the manual of {' '.join(names)}, or give the device_id if it is one of those machines.",
    )


def no_section(asked: str, scope: Scope) -> SearchResult:
    """A question nothing in the manuals answers."""
    return SearchResult(
        status="not_found",
        message=f"No manual section matches {asked!r}" + (f" for {scope_name(scope)}." if scope.vendor else "."),
        suggestion="Give the fault code shown on the HMI (e.g. E102), or describe the symptom differently "
        "(which part, what happens, since when).",
    )


def version_not_found(asked: str, rows: list[IndexRow], version: str | None) -> SearchResult:
    """What was found is not in the manual version asked for."""
    available = sorted({r["version"] for r in rows if r["version"]}, key=version_order)
    return SearchResult(
        status="not_found",
        message=f"{asked!r} is not documented in manual version {version}.",
        suggestion=f"Available versions: {', '.join(available) or 'none'}; ask again without manual_version or with one of these.",
    )


def scope_name(scope: Scope) -> str:
    return " ".join(part for part in (scope.vendor, scope.model) if part)


# -- one hit -----------------------------------------------------------------


def _hit(
    snap: Snapshot,
    row: IndexRow,
    siblings: list[IndexRow],
    scope: Scope,
    score: float,
    match: Match,
    tuning: Tuning,
    words: frozenset[str] = frozenset(),
) -> Hit:
    applies = None
    if scope.vendor or scope.model:
        applies = bool(row["vendor_key"] or row["model_key"]) and in_scope(row, scope)
    page = row["kind"] == "page"
    if page:
        passages = snap.page_rows()[(row["manual_sha256"], row["page"])]
        row = best_passage(snap.body_terms([row, *passages]), words)
    return Hit(
        fault_code=row["code"],
        canonical_id=row["canonical_id"],
        title=row["title"] or row["manual_title"],
        symptom=row["symptom"],
        cause=row["cause"],
        steps=json.loads(row["steps"]),
        manual=row["file"],
        manual_sha256=row["manual_sha256"],
        manual_title=row["manual_title"],
        version=row["version"],
        version_compatibility=(
            f"{row['version'] or 'unversioned'} manual" if page else _compatibility(snap, row, siblings)
        ),
        kind=row["kind"],
        ocr=bool(row["ocr"]),
        snippet=snippet(row, words, tuning.snippet_chars),
        language=row["language"],
        page=row["page"],
        pages=json.loads(row["pages"]),
        vendor=row["vendor"],
        model=row["model"],
        scope=scope_name(Scope(vendor=row["vendor"], model=row["model"])) or "all machines",
        applies_to_device=applies,
        score=round(min(score, 1.0), 4),
        match=match,
    )


def _compatibility(snap: Snapshot, row: IndexRow, siblings: list[IndexRow]) -> str:
    """How the entry's versions differ: which manuals lack the code, which print other steps."""
    versions = sorted({r["version"] for r in siblings if r["version"]}, key=version_order)
    manual_versions = sorted(snap.manual_versions(row["vendor"], row["model"]), key=version_order)
    parts = [
        f"{row['version'] or 'unversioned'} manual" + (f" (valid for {row['valid_for']})" if row["valid_for"] else "")
    ]
    missing = [v for v in manual_versions if v not in versions]
    if missing:
        parts.append(f"code not in the {', '.join(missing)} manual{'s' if len(missing) > 1 else ''}")
    same_lang = {r["version"]: r for r in siblings if r["language"] == row["language"]}
    differ = [v for v, r in same_lang.items() if v != row["version"] and r["steps"] != row["steps"]]
    same = [v for v, r in same_lang.items() if v != row["version"] and r["steps"] == row["steps"]]
    if differ:
        parts.append(
            f"steps differ in {', '.join(sorted(differ, key=version_order))}: follow the manual matching the machine's software"
        )
    if same:
        parts.append(f"same steps in {', '.join(sorted(same, key=version_order))}")
    return "; ".join(parts)


def best_passage(passages: list[tuple[IndexRow, list[str]]], words: frozenset[str]) -> IndexRow:
    """The passage of a matched page that shares the most words (and neighbouring pairs of them)
    with the question: the page matched as a whole, but its answer may sit in a neighbouring
    passage (a table's row). `passages`: each with its index terms, the matched one first."""
    return max(passages, key=lambda item: len(words & {*item[1], *word_pairs(item[1])}))[0]


def snippet(row: IndexRow, words: frozenset[str], chars: int) -> str:
    """A page's passage from the line that shares the most words with the question (and the
    line before it, which often names the table or the fault); an entry's code, name and cause."""
    if row["kind"] == "page":
        lines = [line for line in row["snippet"].splitlines() if line.strip()] or [""]
        best = max(range(len(lines)), key=lambda i: len(words & _line_words(lines[i])))
        text = " ".join(" ".join(lines[max(0, best - 1) :]).split())
    else:
        text = " — ".join(part for part in (f"{row['code']} {row['title']}".strip(), row["cause"]) if part)
    return text if len(text) <= chars else text[: chars - 1] + "…"


# A snippet reads every line of its page, and a plant's questions come back to the same pages: their words are
# kept (at 50,000 rows, 3,000 of the bench's 3,700 line readings were of a line read before).
@functools.lru_cache(maxsize=4096)
def _line_words(text: str) -> frozenset[str]:
    found = terms(text)  # once: cutting Chinese lines into words is most of a snippet's time
    return frozenset((*found, *code_terms(text), *word_pairs(found)))
