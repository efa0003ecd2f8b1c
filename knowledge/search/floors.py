"""When nothing answers: the not-found floors a question's evidence must pass, the names that raise them, and a
question that asks only about codes no manual prints."""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.codes import code_terms
from knowledge.search.question import Question
from knowledge.search.store import Snapshot
from knowledge.text import stop_words, terms
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

    def unanswered(self, tuning: Tuning) -> bool:
        """Nothing is close in meaning, nothing holds most of the question's words, and the closest in
        meaning is not also among the best by words."""
        raised = tuning.unknown_name_factor if self.unknown_names else 1.0
        return not (
            self.similarity >= tuning.min_similarity * raised
            or max(self.coverage, self.concepts) >= tuning.min_coverage * raised
            or (self.agreed and self.similarity >= tuning.min_agreed_similarity * raised)
        )


def unknown_names(snap: Snapshot, text: str) -> list[str]:
    """The names a text gives (capitalised words, tokens mixing letters and digits) that no row of the library
    holds, neither as a word nor as a code."""
    names = [m.group(0) for m in _NAME.finditer(text) if m.group(0).lower() not in stop_words()]
    unknown = []
    for name in dict.fromkeys(names):
        words = list(dict.fromkeys(terms(name) + code_terms(name, every_token=True)))
        if words and not any(snap.counts(words).values()):
            unknown.append(name)
    return unknown


def only_unknown_codes(snap: Snapshot, question: Question) -> bool:
    """The question asks about its printed codes and nothing else, and no manual prints them: not as an entry
    (looked up before this) nor anywhere in a page's text."""
    return not question.besides_codes and not any(snap.counts(question.printed_words).values())
