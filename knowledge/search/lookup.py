"""Codes looked up in the entries' code column: exact, then look-alike, then (only when nothing else answers)
the near codes a code not found names.

Exact lookups never touch the embedding model. A code is looked up by its exact keys first, then by keys that
drop zero padding and fold 7-segment look-alikes, so an exact code always wins.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from knowledge.codes import code_key, lookalike_keys, lookup_keys, loose_key
from knowledge.models import Match, Scope, SearchResult
from knowledge.search.floors import unknown_names
from knowledge.search.hits import code_answer, code_not_found, collapse, listed_elsewhere, prefer, version_not_found
from knowledge.search.question import Question
from knowledge.search.rows import in_scope
from knowledge.search.store import Snapshot
from knowledge.tuning import Tuning


def entry_ids(snap: Snapshot, code: str) -> tuple[list[int], Match]:
    """The entries a typed code names: by its exact keys, else (a `lookalike` match) by its look-alike keys."""
    for key in lookup_keys(code):
        ids = _exact_ids(snap, key)
        if ids:
            return ids, "exact"
    for key in lookalike_keys(code):
        ids = snap.ids_by_loose_key(key)
        if ids:
            return ids, "lookalike"
    return [], "exact"


def look_up(
    snap: Snapshot, code: str, scope: Scope, version: str | None, language: str, k: int, tuning: Tuning
) -> SearchResult | None:
    """A code's entries as hits, those of the scope's machine where it has any; None when no entry holds it."""
    ids, match = entry_ids(snap, code)
    rows = [snap.rows[i] for i in ids]
    if not rows:
        return None
    scoped = [row for row in rows if in_scope(row, scope)]
    chosen = scoped or rows
    hits = collapse(snap, [(row, 1.0, match) for row in chosen], scope, version, language, k, tuning)
    if not hits:
        return version_not_found(code, chosen, version)
    return code_answer(code, hits, match, scope, listed_for_scope=bool(scoped))


def near_codes(snap: Snapshot, code: str, scope: Scope, tuning: Tuning) -> list[str]:
    """The codes (as printed) a code no entry holds may have been meant as: those of its leading capitals and
    length, nearest in number first, then those typed alike."""
    codes = snap.codes_in(scope)
    key = code_key(code)
    prefix = re.sub(r"[^A-Z].*", "", key, flags=re.DOTALL)  # its leading capitals
    near = sorted(
        (k for k in codes if prefix and k.startswith(prefix) and len(k) == len(key)),
        key=lambda k: _distance(k, key),
    )[: tuning.near_codes]
    alike = difflib.get_close_matches(key, list(codes), n=tuning.near_codes, cutoff=tuning.near_code_similarity)
    near += [k for k in alike if k not in near][: tuning.near_codes - len(near)]
    return [codes[k] for k in near]


@dataclass
class CodeLookup:
    """A question's codes looked up: the answer, if one of them has one, else what to say about them."""

    answer: SearchResult | None
    looked_up: list[str]  # the codes it gives and those the linker read in it
    # The codes reported as not found when nothing else answers (not its typed tokens), each with its entries.
    reported: list[tuple[str, SearchResult | None]]
    # Names of a machine no manual is about (`Danfoss FC302 alarm 14`): another machine's code is no answer.
    foreign: list[str]

    def not_found(self, snap: Snapshot, scope: Scope | None, tuning: Tuning) -> SearchResult:
        """The first reported code: listed only for other machines, or not found (its near codes looked for
        only now)."""
        listed = next(((code, r) for code, r in self.reported if r is not None), None) if self.foreign else None
        if listed is not None:
            return listed_elsewhere(listed[0], self.foreign, listed[1])
        code, found = self.reported[0]
        scope = scope or Scope()
        return found or code_not_found(code, scope, near_codes(snap, code, scope, tuning))


def look_up_codes(
    snap: Snapshot, question: Question, scope: Scope | None, version: str | None, k: int, tuning: Tuning
) -> CodeLookup:
    """The codes a question prints, then (when none of them answers) those the linker reads in it, then the
    whole of a short question as a code the index holds. A code answers unless the question names manuals and
    none of its hits is from them, or names a machine no manual is about."""

    def look(code: str) -> SearchResult | None:
        found = look_up(snap, code, scope or Scope(), version, question.language, k, tuning)
        if found is not None:
            found.hits = prefer(found.hits, question.mentioned, question.language)
        return found

    codes = list(question.codes)
    results = [(code, look(code)) for code in codes]
    # A machine the question names that no manual is about: another machine's code of the same number is no
    # answer. The codes entries hold are no such name (`ALM` of `ALM 5`).
    held = [re.escape(code) for code, result in results if result is not None]
    foreign = (
        unknown_names(snap, re.sub("|".join(held), " ", question.asked))
        if held and not question.mentioned and not (scope and (scope.vendor or scope.model))
        else []
    )

    def answer() -> SearchResult | None:
        return next((r for _, r in results if r is not None and not foreign and _answers(r, question.mentioned)), None)

    answered = answer()
    linked: list[str] = []
    if answered is None:
        # A short bare number is a code only after a cue word (which `question.printed` saw): `blinks 6 times`
        # is no alarm 6.
        linked = [
            code
            for code in snap.linked_codes(question.asked, question.language)
            if not (code.isdigit() and len(code) < tuning.bare_code_digits)
        ]
        results += [(code, look(code)) for code in linked if code not in codes]
        answered = answer()
        if (
            answered is None
            and not foreign
            and not linked
            and _short(question.asked, tuning)
            and _known(snap, question.asked)
        ):
            answered = look(question.asked)
            linked = [question.asked]  # the whole question is the code
    return CodeLookup(
        answer=answered,
        looked_up=codes + linked,
        reported=results[: len(question.shown)] + results[len(codes) :],
        foreign=foreign,
    )


def _exact_ids(snap: Snapshot, key: str) -> list[int]:
    ids = snap.ids_by_code_key(key)
    if not ids and key.isdigit():  # `01204` is what the HMI shows for the manual's `XX204`
        ids = snap.ids_by_pattern(key)
    if ids and key.isdigit():  # one number padded as each manual prints it: `23` is also `0023` there
        ids += [i for i in snap.ids_by_loose_key(loose_key(key)) if i not in ids and snap.rows[i]["code_key"].isdigit()]
    return ids


def _known(snap: Snapshot, code: str) -> bool:
    return bool(entry_ids(snap, code)[0])


def _short(text: str, tuning: Tuning) -> bool:
    return 0 < len(text.split()) <= tuning.code_question_words and len(text.strip()) <= tuning.code_question_chars


def _answers(result: SearchResult, mentioned: frozenset[str]) -> bool:
    """A code lookup answers unless the question names manuals and none of the hits is from them."""
    return result.status == "ok" and (not mentioned or result.hits[0].manual_sha256 in mentioned)


def _distance(a: str, b: str) -> int:
    digits_a, digits_b = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
    return abs(int(digits_a) - int(digits_b)) if digits_a and digits_b else 10**6
