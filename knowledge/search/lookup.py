"""Codes looked up in the entries' code column: exact, then look-alike, then (only when nothing else answers)
the near codes a code not found names.

Exact lookups never touch the embedding model. A code is looked up by its exact keys first, then by keys that
drop zero padding and fold 7-segment look-alikes, so an exact code always wins.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from knowledge.codes import (
    MENTION,
    after_cues,
    code_key,
    code_terms,
    lookalike_keys,
    lookup_keys,
    loose_key,
    mentioned_code,
)
from knowledge.models import Match, Scope, SearchResult
from knowledge.search.floors import asked_manuals_may_print, numbered_tables, unknown_names
from knowledge.search.hits import (
    code_answer,
    code_not_found,
    collapse,
    listed_elsewhere,
    others_marked,
    prefer,
    scope_name,
    version_not_found,
)
from knowledge.search.question import Question
from knowledge.search.rows import Ranked, in_scope
from knowledge.search.store import Snapshot
from knowledge.text import stop_words
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
    found = _entries(snap, code, scope, frozenset(), version, language, k, tuning)
    return found.result if found is not None else None


@dataclass(frozen=True)
class _Entries:
    result: SearchResult
    # Only manuals other than those asked about (the scope's machine's, the manuals the question names) list it.
    elsewhere: bool


def _entries(
    snap: Snapshot,
    code: str,
    scope: Scope,
    named: frozenset[str],
    version: str | None,
    language: str,
    k: int,
    tuning: Tuning,
) -> _Entries | None:
    """A code's entries as hits: those of the scope's machine and of the manuals the question names (`named`,
    sha256) where they list it, else the other manuals' entries, each marked as not the asked machine's."""
    ids, match = entry_ids(snap, code)
    rows = [snap.rows[i] for i in ids]
    if not rows:
        return None
    asked = [row for row in rows if in_scope(row, scope) and (not named or row["manual_sha256"] in named)]
    chosen = asked or rows
    hits = collapse(snap, [(row, 1.0, match) for row in chosen], scope, version, language, k, tuning)
    if not hits:
        return _Entries(version_not_found(code, chosen, version), elsewhere=not asked)
    hits = others_marked(hits, named)
    where = ""
    if not asked and named:
        where = " or ".join(f"the {snap.names.title(sha)}" for sha in sorted(named, key=snap.names.title))
    elif not asked and (scope.vendor or scope.model):
        where = (
            f"the manuals for {scope.label} ({scope_name(scope)})"
            if scope.label
            else f"the {scope_name(scope)} manuals"
        )
    return _Entries(code_answer(code, hits, match, where), elsewhere=not asked)


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
    # The answer is other machines' entries: the manuals of the machine asked about do not list the code.
    elsewhere: bool
    looked_up: list[str]  # the codes it gives and those the linker read in it
    # The codes reported as not found when nothing else answers (not its typed tokens), each with its entries.
    reported: list[tuple[str, SearchResult | None]]
    # Names of a machine no manual is about (`Danfoss FC302 alarm 14`): another machine's code is no answer.
    foreign: list[str]

    @property
    def listed_for_others(self) -> bool:
        """The question names a machine no manual is about, and its code is listed for other machines: no page
        of theirs answers it either."""
        return bool(self.foreign) and any(found is not None for _, found in self.reported)

    def not_found(self, snap: Snapshot, scope: Scope | None, tuning: Tuning) -> SearchResult:
        """The first reported code: listed only for other machines, or not found (its near codes looked for
        only now)."""
        listed = next(((code, r) for code, r in self.reported if r is not None), None) if self.foreign else None
        if listed is not None:
            return listed_elsewhere(listed[0], self.foreign, listed[1])
        code, found = self.reported[0]
        scope = scope or Scope()
        code = _typed_code(code)  # the code as printed, not `inverter shows E55`
        return found or code_not_found(code, scope, near_codes(snap, code, scope, tuning))


def look_up_codes(
    snap: Snapshot, question: Question, scope: Scope | None, version: str | None, k: int, tuning: Tuning
) -> CodeLookup:
    """The codes a question prints, then (when none of them answers) those the linker reads in it, then the
    whole of a short question as a code the index holds. A code answers unless it names a machine no manual is
    about, or only other machines' manuals list it while a page of the asked machine's (the scope's, the
    manuals the question names) prints it: then that page, which a search finds, is the answer."""
    asked = scope or Scope()

    def look(code: str) -> tuple[_Entries | None, bool]:
        """A code's entries, and whether they may answer."""
        found = _entries(snap, code, asked, question.mentioned, version, question.language, k, tuning)
        if found is None:
            return None, False
        found.result.hits = prefer(found.result.hits, question.mentioned, question.language)
        answers = bool(found.result.hits) and not (
            (found.elsewhere and _asked_manuals_print(snap, found.result, code, asked, question.mentioned, tuning))
            or _printed_as_typed_elsewhere(snap, code, found.result)
        )
        return found, answers

    codes = list(question.codes)
    results = [(code, *look(code)) for code in codes]
    # A code typed with a space between its letters and its number (`Er 1`, `er 14`), as a display spaces them, is
    # one where the machine asked about lists it so (another machine's `IN 5` is no `in 5 minutes`).
    for typed in _spaced_codes(question):
        ids, match = entry_ids(snap, typed)
        if not ids or match != "exact":
            continue
        found, answers = look(typed)
        if found is not None and not (found.elsewhere and (asked.vendor or asked.model or question.mentioned)):
            codes.append(typed)
            results.append((typed, found, answers))
    # A machine the question names that no manual is about: another machine's code of the same number is no
    # answer. The codes entries hold are no such name (`ALM` of `ALM 5`), nor is a German noun (`Wechselrichter`).
    held = [re.escape(code) for code, found, _ in results if found is not None]
    foreign = (
        unknown_names(snap, re.sub("|".join(held), " ", question.named, flags=re.I))
        if held and not question.mentioned and not (scope and (scope.vendor or scope.model))
        else []
    )

    def answer() -> _Entries | None:
        return next((found for _, found, answers in results if answers and not foreign), None)

    answered = answer()
    linked: list[str] = []
    if answered is None:
        # A short bare number is a code only after a cue word (which `question.printed` saw): `blinks 6 times`
        # is no alarm 6. Read without the names of the manuals it gives: `TW-90` of `TW-90 whistles` is the
        # product, whatever code its shape resembles.
        linked = [
            code
            for code in snap.linked_codes(question.text, question.language)
            if not (code.isdigit() and len(code) < tuning.bare_code_digits)
        ]
        results += [(code, *look(code)) for code in linked if code not in codes]
        answered = answer()
        if (
            answered is None
            and not foreign
            and not linked
            and _short(question.asked, tuning)
            and _known(snap, question.asked)
        ):
            answered = look(question.asked)[0]
            linked = [question.asked]  # the whole question is the code
    if answered is None or answered.elsewhere:
        # A display's letters before a number that the machine's table of numbered codes prints alone (`F13` where
        # the EASUN's table lists `13`; the Vacon shows `FT 60` for its table's `60`): that number's entry, before
        # another machine's entry of the code or a look-alike of it.
        tables = numbered_tables(snap, question, asked, tuning)
        shown = [n for n in dict.fromkeys(map(_display_number, codes)) if n and any(int(n) in t for t in tables)]
        own = [(number, *look(number)) for number in shown]
        results += own
        answered = next((found for _, found, answers in own if answers and not foreign), answered)
    reported = results[: len(question.shown)] + results[len(codes) :]
    return CodeLookup(
        answer=answered.result if answered is not None else None,
        elsewhere=answered is not None and answered.elsewhere,
        looked_up=codes + linked,
        reported=[(code, found.result if found is not None else None) for code, found, _ in reported],
        foreign=foreign,
    )


def _exact_ids(snap: Snapshot, key: str) -> list[int]:
    ids = snap.ids_by_code_key(key)
    if not ids and key.isdigit():  # `01204` is what the HMI shows for the manual's `XX204`
        ids = snap.ids_by_pattern(key)
    if ids and key.isdigit():  # one number padded as each manual prints it: `23` is also `0023` there
        ids += [i for i in snap.ids_by_loose_key(loose_key(key)) if i not in ids and snap.rows[i]["code_key"].isdigit()]
    return ids


# Letters, a space, a number: how a display's code is typed when it spaces them (`Er    14`).
_SPACED_TYPED = re.compile(r"(?<![\w.])(?P<letters>[A-Za-z]{1,4})\s+\d{1,5}(?![\w.,]\d|\w)")


def _spaced_codes(question: Question) -> list[str]:
    """The tokens of a question typed as letters, a space and a number that are not its codes already, unless their
    letters are a word of its language typed as one (`in 5`; `Er 53` in German is no `er`)."""
    stopped = stop_words(question.language if question.language in ("en", "de") else "en")
    return [
        match.group(0)
        for match in _SPACED_TYPED.finditer(question.text)
        if match.group(0) not in question.codes
        and not (match.group("letters").islower() and match.group("letters") in stopped)
    ]


def _display_number(code: str) -> str | None:
    """The number of a code typed as a display shows it, a few letters before a number (`F13`, `FT 60`)."""
    match = re.fullmatch(r"[A-Z]{1,3}(\d{1,5})", code_key(code))
    return match.group(1) if match else None


def _known(snap: Snapshot, code: str) -> bool:
    return bool(entry_ids(snap, code)[0])


def _short(text: str, tuning: Tuning) -> bool:
    return 0 < len(text.split()) <= tuning.code_question_words and len(text.strip()) <= tuning.code_question_chars


def _asked_manuals_print(
    snap: Snapshot, found: SearchResult, asked: str, scope: Scope, named: frozenset[str], tuning: Tuning
) -> bool:
    """Whether the asked machine's manuals (those the question names, else the scope's) print a code as it was
    `asked` or as the entries found print it, in any row: a manual whose table was not read as entries still names
    its codes (`ERR98` on the pages of the asked manual, whose table gave no entries, is no other make's alarm
    0098). A bare number (`alarm 9`) is printed as a word: every machine numbers its alarms, and another make's
    alarm 9 is no answer where the asked machine's pages print a 9 (the FR-SX manual's alarm list is a scan no
    table was read from; the EP100's entry 9 answered `FR-SX alarm 9`)."""
    typed = _typed_code(asked)
    # A number as typed is on too many pages (a page number, a setting) to say the asked manual knows it as a
    # code, unless a cue word comes before it there (`WARNING CODE 44`).
    printed = [*([typed] if _lettered(typed) else []), *(hit.fault_code for hit in found.hits)]
    words = list(
        dict.fromkeys(term for code in printed for term in [*code_terms(code, every_token=True), *_as_word(code)])
    )
    words += after_cues(typed) if typed.isdigit() else []
    # A scan's own page, which a search finds, is a better answer than another machine's entry.
    return asked_manuals_may_print(snap, words, scope, named, tuning)


def _printed_as_typed_elsewhere(snap: Snapshot, asked: str, found: SearchResult) -> bool:
    """The entries found are bare numbers, read from a code typed with letters (`ERR99` as another make's alarm
    `0099`, its letters dropped as a cue), while some row prints the code as typed: that row's page, which a
    search finds, is about the code asked for (the multiMAUS's `ERR99` in a manual whose table gave no entries)."""
    typed = _typed_code(asked)
    if not _lettered(typed) or not all(hit.fault_code.isdigit() for hit in found.hits):
        return False
    words = code_terms(typed, every_token=True)
    return bool(words) and any(snap.counts(words).values())


def on_scanned_pages(
    snap: Snapshot, question: Question, scope: Scope, version: str | None, k: int, tuning: Tuning
) -> SearchResult | None:
    """A code asked of a scanned manual (one the question names, else the device's) that nothing found there: the
    fault pages of it that print a word as OCR may have misread the code, one character apart (a dot-matrix `X04`
    read as `x84`), most such words first. None where no asked manual is a scan, or no page prints such a word."""
    codes = [code.lower() for code in question.printed_codes]
    named = question.mentioned
    if not codes or not snap.scanned(scope, named):
        return None
    pages = [
        rows
        for (sha, _), rows in snap.page_rows().items()
        if sha in snap.scans and (sha in named if named else in_scope(rows[0], scope)) and any(r["fault"] for r in rows)
    ]
    ranked: Ranked = []
    for rows in pages:
        words = set().union(*snap.index_terms([row["id"] for row in rows]))
        near = sum(1 for code in codes for word in words if _misread(code, word))
        if near:
            ranked.append((rows[0], float(near), "lexical"))
    if not ranked:
        return None
    ranked.sort(key=lambda item: -item[1])
    return SearchResult(
        status="ok",
        hits=collapse(snap, ranked, scope, version, question.language, k, tuning, question.hit_words),
        message=f"No page prints {', '.join(question.printed_codes)} as typed; these pages of the scanned manual print "
        "a code one character apart, as OCR may have misread it.",
        suggestion="Read the code off the page itself.",
    )


def _misread(code: str, word: str) -> bool:
    """A word OCR may have read for a code: as long, the same first character, and one other character apart."""
    return (
        len(word) == len(code) >= 3 and word[0] == code[0] and sum(a != b for a, b in zip(code, word, strict=True)) == 1
    )


def _typed_code(asked: str) -> str:
    """A code as the question gave it, without its cue (`ERR98` of `shows ERR98`)."""
    mention = MENTION.fullmatch(asked)
    return mentioned_code(mention) if mention else asked


def _lettered(code: str) -> bool:
    return any(c.isalpha() for c in code)


def _as_word(code: str) -> list[str]:
    """A bare number as the word index holds it (code terms hold only codes with letters or padding)."""
    return [code] if code.isdigit() else []


def _distance(a: str, b: str) -> int:
    digits_a, digits_b = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
    return abs(int(digits_a) - int(digits_b)) if digits_a and digits_b else 10**6
