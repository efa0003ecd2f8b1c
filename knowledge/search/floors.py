"""When nothing answers: the not-found floors a question's evidence must pass, what raises them (names no row
prints, and the share of the question's meaning that rests on words no row prints), and a question that asks only
about codes no manual prints."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from knowledge.codes import after_cues, code_key, code_terms
from knowledge.glossary import translate_to_english, translations
from knowledge.ingest.languages import MACHINE_ENDINGS
from knowledge.models import Scope
from knowledge.search.question import Question
from knowledge.search.store import Snapshot
from knowledge.text import CJK, counted_words, holds, stop_words, terms
from knowledge.tuning import Tuning

# A name as questions give one: a capitalised word (Vaillant, KUKA) or a token mixing letters and digits
# (FC302, AL013, A.810, 0x8611).
_NAME = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Z][A-Za-z]{2,}|(?=[A-Za-z.\-]*\d)(?=[\d.\-]*[A-Za-z])[A-Za-z0-9]+(?:[.\-][A-Za-z0-9]+)*)"
    r"(?![A-Za-z0-9])"
)


@dataclass(frozen=True)
class Evidence:
    """Whether any row answers a question: the best similarity in meaning, the largest share of its words
    (and of its glossary concepts) on one of the best rows by words, and whether the closest row in meaning
    is also among those."""

    similarity: float
    coverage: float
    concepts: float
    agreed: bool
    # Names the question gives (a brand, a model, a code: `Vaillant`, `FC302`, `AL013`) that no row of
    # the library prints: a question about some other machine, which needs stronger evidence.
    unknown_names: int = 0
    # How much of the question's meaning rests on words no row of the library holds (`unread_share`): from 0
    # (they are phrasing: `doesnt`, `forth`) to 1 (they are what it asks about: the `forklift` of `reset the
    # battery alarm on the forklift`). The words it shares with rows are then only its generic ones. At least
    # `unread`; `measure_unread`, where given, measures it (`unread_measured`).
    unread: float = 0.0
    # Measuring embeds the question a second time, without those words: a third of an unscoped search, spent
    # only where the answer turns on it.
    measure_unread: Callable[[], float] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def unread_measured(self) -> float:
        return max(self.unread, self.measure_unread()) if self.measure_unread is not None else self.unread

    def unanswered(self, tuning: Tuning) -> bool:
        """Nothing is close in meaning, nothing holds most of the question's words, and the closest in
        meaning is not also among the best by words. The floors only rise with the unread share: a question
        that fails them at its least is not measured."""
        return not self._passes(tuning, self.unread) or not self._passes(tuning, self.unread_measured)

    def _passes(self, tuning: Tuning, unread: float) -> bool:
        raised = tuning.unknown_name_factor if self.unknown_names else 1.0
        raised *= 1.0 + tuning.unread_factor * unread
        return (
            self.similarity >= tuning.min_similarity * raised
            or max(self.coverage, self.concepts) >= tuning.min_coverage * raised
            or (self.agreed and self.similarity >= tuning.min_agreed_similarity * raised)
        )


def unknown_names(snap: Snapshot, text: str, own: str = "") -> list[str]:
    """The names a text gives (capitalised words, tokens mixing letters and digits) that no row of the library
    holds, neither as a word nor as a code; not `own`, the asked machine's name in the plant (`cnc-7`)."""
    names = [
        m.group(0)
        for m in _NAME.finditer(text)
        if m.group(0).lower() not in stop_words() and not (own and code_key(m.group(0)) == code_key(own))
    ]
    unknown = []
    for name in dict.fromkeys(names):
        # A designation is held as a whole, or by its parts that mix letters and digits (`006TC1` of `BLN-006TC1`):
        # the `cw` of `CW-5200` is every manual's clockwise.
        words = terms(name)
        if _mixed(name):
            words = code_terms(name, every_token=True) + [word for word in words if _mixed(word)]
        if words and not any(snap.counts(words).values()):
            unknown.append(name)
    return unknown


def _mixed(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def words_no_row_holds(snap: Snapshot, question: Question, scope: Scope) -> list[str]:
    """The question's own words (not its codes or numbers) that no row of the library holds, in either language: a word is
    held when it is on some row, or (for a Chinese word, which a manual may cut differently) each of its
    character pairs is, or one of the glossary's renditions of it in the other language is. None where the
    question's machine is known (asked at a machine, or naming a manual of the library): it is about that
    machine, and such words are how it was put (`the touch screen is not updating`), not another machine."""
    if scope.vendor or scope.model or question.mentioned:
        return []
    # Its codes and numbers are looked up as codes, and one no manual prints is an unknown name (`unknown_names`).
    codes = set(terms(" ".join(question.codes)))
    words = [word for word in counted_words(question.text) if word not in codes and not any(c.isdigit() for c in word)]
    counts = snap.counts(words)
    return [word for word in words if not counts[word] and not _held_otherwise(snap, word)]


def _held_otherwise(snap: Snapshot, word: str) -> bool:
    if CJK.match(word):
        pairs = [word[i : i + 2] for i in range(len(word) - 1)]
        counts = snap.counts(pairs)
        if holds({pair for pair in pairs if counts[pair]}, word):
            return True
    variants = [terms(variant) for concept in translations(word) for variant in concept]
    return any(found and all(snap.counts(found).values()) for found in variants)


def without_words(read: str, words: list[str], language_read: bool) -> str:
    """The text the embedding model reads (the question, or its English rendition where the model does not
    read its language) without these words: each as the model reads it, itself or the glossary's English
    for it (a word the glossary does not know is not in the rendition either)."""
    readings = words if language_read else [translate_to_english(word) for word in words]
    dropped = {part for reading in readings for part in re.findall(r"\w+", reading.lower())}
    return " ".join(part for part in re.findall(r"\S+", read) if not set(re.findall(r"\w+", part.lower())) & dropped)


def machines_named(words: list[str]) -> list[str]:
    """The words among these that name a kind of machine, by how each language ends such a word
    (`knowledge.ingest.languages`: `打印机`, `Gabelstapler`)."""
    return [word for word in words if word.lower().endswith(MACHINE_ENDINGS)]


def written_share(text: str, words: list[str]) -> float:
    """The share of a text's letters (CJK characters and Latin letters) that these words of it hold."""
    letters = sum(1 for c in text if c.isalpha())
    return min(1.0, sum(len(word) for word in words) / letters) if letters else 0.0


def unread_share(question_vector: np.ndarray, without_vector: np.ndarray | None) -> float:
    """The share of the question's meaning the words no row holds carry: 1 - the cosine between the question
    and the question without them (both unit vectors; None: nothing is left of it)."""
    if without_vector is None:
        return 1.0
    return float(min(1.0, max(0.0, 1.0 - float(question_vector @ without_vector))))


def asked_manuals_print(snap: Snapshot, words: list[str], scope: Scope, named: frozenset[str], tuning: Tuning) -> bool:
    """Whether the manuals asked about (those named, sha256, else the scope's) hold any of the words on a row."""
    if named:  # every manual that prints the word: a common code is on more rows than a ranking keeps
        return any(snap.names.printing(word) & named for word in words)
    return bool(words) and bool(snap.bm25(words, scope, 1, tuning.bm25_columns))


def asked_manuals_may_print(
    snap: Snapshot, words: list[str], scope: Scope, named: frozenset[str], tuning: Tuning
) -> bool:
    """`asked_manuals_print`, or one of those manuals is a scan: a code OCR misread (`X04` as `XØ4`) is printed
    nowhere in it, so its text cannot say it lacks the code."""
    return snap.scanned(scope, named) or asked_manuals_print(snap, words, scope, named, tuning)


def codes_the_machine_lacks(snap: Snapshot, question: Question, scope: Scope, tuning: Tuning) -> bool:
    """The question is about a known machine (it names its manuals, or is asked at it) and gives codes, none of which
    those manuals print anywhere: the machine's manuals list other codes, and a page sharing the question's other
    words (`heat pump error E60`: the heat pump's pages) answers no code of it. Not where one of them is a scan
    (`asked_manuals_may_print`)."""
    return _machine_prints(snap, question, scope, tuning, as_codes=False) is False


def numbered_tables(snap: Snapshot, question: Question, scope: Scope, tuning: Tuning) -> list[frozenset[int]]:
    """The known machine's tables of numbered codes (of the manuals the question names, else of the machine's own
    manuals) that list at least `numbered_table_entries` numbers and nearly every number from their first to their
    last: such a table lists all the machine's numbered codes. None where the machine is not known."""
    if not (question.mentioned or scope.vendor or scope.model):
        return []
    return [
        listed
        for sha, listed in snap.numbered_codes().items()
        if (sha in question.mentioned if question.mentioned else snap.in_scope_manual(sha, scope, own=True))
        and len(listed) >= tuning.numbered_table_entries
        and len(listed) >= tuning.numbered_table_share * (max(listed) - min(listed) + 1)
    ]


def numbers_the_machine_skips(snap: Snapshot, question: Question, scope: Scope, tuning: Tuning) -> bool:
    """The question's codes are numbers after a cue word (`fault code 16`) that the known machine's table of numbered
    codes skips (`numbered_tables`: `01`-`15`, `18`-`23`), so a technician reading it sees there is no 16, though
    the number is printed elsewhere in the manual (a page, a value, a date). Not where the machine prints one of
    them after a cue word, nor where it is a scan."""
    numbers = [code_key(code) for code in question.printed_codes]
    if not numbers or not all(number.isdigit() for number in numbers):
        return False
    tables = numbered_tables(snap, question, scope, tuning)
    if not tables or snap.scanned(scope, question.mentioned) or codes_the_machine_prints(snap, question, scope, tuning):
        return False
    return all(any(min(t) < int(n) < max(t) and int(n) not in t for t in tables) for n in numbers)


def codes_the_machine_prints(snap: Snapshot, question: Question, scope: Scope, tuning: Tuning) -> bool:
    """The known machine's manuals print one of the question's codes after a cue word (`WARNING CODE 44`): the page
    that prints it answers, however few of the question's other words it shares (`Warnung 44 Verdichter Stufe 2`
    on an English manual)."""
    return bool(_machine_prints(snap, question, scope, tuning, as_codes=True))


def _machine_prints(snap: Snapshot, question: Question, scope: Scope, tuning: Tuning, as_codes: bool) -> bool | None:
    """Whether the manuals of the machine asked about print a code the question gives; None where the machine is not
    known or the question gives no code. `as_codes`: only after a cue word (alone, `44` or `E1` is on many manuals'
    pages as a page number, a setting or a terminal, and says little; but a table's cell prints a code alone too,
    so printed nowhere at all is what says a machine lacks it; and a scan may print it misread)."""
    # The machine's own name is no code of it (`coolant dribbles on cnc-7`, asked at cnc-7).
    codes = [code for code in question.printed_codes if code_key(code) != code_key(scope.label)]
    if not (question.mentioned or scope.vendor or scope.model) or not codes:
        return None
    words = [word for code in codes for word in (after_cues(code) if as_codes else [*terms(code), *code_terms(code)])]
    printing = asked_manuals_print if as_codes else asked_manuals_may_print
    return printing(snap, words, scope, question.mentioned, tuning)


def only_unknown_codes(snap: Snapshot, question: Question) -> bool:
    """The question asks about its printed codes and nothing else, and no manual prints them: not as an entry
    (looked up before this) nor anywhere in a page's text."""
    return not question.besides_codes and not any(snap.counts(question.printed_words).values())
