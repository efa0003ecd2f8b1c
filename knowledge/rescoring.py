"""The second look at the best candidates: the first stage fuses rankings by rank alone, so a page that
mentions a code in passing and the entry whose code column holds it, or a row that shares the question's
words in its remedy and one that shares them in its name, stand where their ranks put them. Here the top
candidates are re-weighed by where in the row the question's code and words are found, how close the row
is in meaning, and what kind of row it is.

A candidate's score is multiplied by exp(w · f): `f` its features (each 0..1), `w` the tuning's
`Weights`, fitted leave-one-manual-out by `scripts/bench_manuals.py --folds`. All weights zero keep the
first stage's order.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, fields

from knowledge.passages import code_terms
from knowledge.ranking import IndexRow, Ranked
from knowledge.text import stem, terms
from knowledge.tuning import Weights

# Only the head of the first stage's list is looked at again: the answer is almost always among these.
RESCORED = 20


FEATURES = tuple(f.name for f in fields(Weights))


@dataclass(frozen=True)
class Question:
    """A question's words as rows are compared with it: its own (stemmed) and the glossary's other-language
    rendition of them, its neighbouring pairs and the codes it prints."""

    language: str
    words: frozenset[str]
    translated: frozenset[str]
    pairs: frozenset[str]
    codes: frozenset[str]

    @classmethod
    def of(cls, text: str, translation: str, language: str) -> Question:
        own = _stemmed(terms(text))
        return cls(
            language=language,
            words=frozenset(own),
            translated=frozenset(_stemmed(terms(translation))) - frozenset(own),
            pairs=frozenset(_pairs(own)),
            codes=frozenset(code_terms(text)),
        )


@dataclass(frozen=True)
class RowWords:
    """A row's words by field (stemmed), its word pairs and the codes its text prints."""

    name: frozenset[str]
    cause: frozenset[str]
    remedy: frozenset[str]
    every: frozenset[str]
    pairs: frozenset[str]
    code: frozenset[str]
    text_codes: frozenset[str]

    @classmethod
    def of(cls, row: IndexRow) -> RowWords:
        return cls._of_fields(_fields(row))

    @classmethod
    def stored(cls, text: str) -> RowWords:
        """A row's words from what `stored_words` wrote at index build."""
        return cls._of_fields(json.loads(text))

    @classmethod
    def _of_fields(cls, fields: dict[str, list[str]]) -> RowWords:
        name, body = fields["name"], fields["body"]
        return cls(
            name=frozenset(name),
            cause=frozenset(fields["cause"]),
            remedy=frozenset(fields["remedy"]),
            every=frozenset(name + body),
            pairs=frozenset(_pairs(name) + _pairs(body)),
            code=frozenset(fields["code"]),
            text_codes=frozenset(fields["text_codes"]),
        )


def stored_words(row: IndexRow) -> str:
    """What the index keeps of a row for `RowWords.stored`: stemming and cutting its text into words is
    most of the second look's time on a row, too slow to do for each question's cold candidates in a
    large library. The name and the body keep their order (the pairs are read from it)."""
    return json.dumps(_fields(row), ensure_ascii=False, separators=(",", ":"))


def _fields(row: IndexRow) -> dict[str, list[str]]:
    steps = " ".join(json.loads(row["steps"]))
    body = row["snippet"] if row["kind"] == "page" else f"{row['symptom']} {row['cause']} {steps}"
    return {
        "name": _stemmed(terms(f"{row['code']} {row['title']}")),
        "body": _stemmed(terms(body)),
        "cause": _unique(_stemmed(terms(f"{row['symptom']} {row['cause']}"))),
        "remedy": _unique(_stemmed(terms(steps))),
        "code": code_terms(row["code"], every_token=True) if row["kind"] == "entry" else [],
        "text_codes": code_terms(f"{row['title']} {body}"),
    }


def features(row: IndexRow, words: RowWords, question: Question, similarity: float) -> tuple[float, ...]:
    """The row's features, in `Weights` order."""
    in_code = bool(question.codes & words.code)
    return (
        float(in_code),
        float(not in_code and bool(question.codes & words.text_codes)),
        _share(question, words.name),
        _share(question, words.cause),
        _share(question, words.remedy),
        _share(question, words.every),
        len(question.pairs & words.pairs) / len(question.pairs) if question.pairs else 0.0,
        min(max(similarity, 0.0), 1.0),
        float(row["kind"] == "entry"),
        float(row["language"] == question.language),
        float(bool(row["ocr"])),
        float(bool(row["fault"])),
    )


def rescore(ranked: Ranked, head_features: list[tuple[float, ...]], weights: Weights) -> Ranked:
    """The first candidates (as many as `head_features` describes) in their new order, each with its new
    score, and the rest after them as they were."""
    w = weights.vector()
    head, tail = ranked[: len(head_features)], ranked[len(head_features) :]
    rescored = [
        (row, score * math.exp(sum(a * b for a, b in zip(w, f, strict=True))), how)
        for (row, score, how), f in zip(head, head_features, strict=True)
    ]
    return sorted(rescored, key=lambda item: -item[1]) + tail


def _share(question: Question, found: frozenset[str]) -> float:
    """The share of the question's words a field holds: its own words, or for a row in the other
    language the glossary's rendition of them, whichever is higher."""
    own = len(question.words & found) / len(question.words) if question.words else 0.0
    other = len(question.translated & found) / len(question.translated) if question.translated else 0.0
    return max(own, other)


def _stemmed(words: list[str]) -> list[str]:
    return [stem(word) if word.isascii() else word for word in words]


def _unique(words: list[str]) -> list[str]:
    return list(dict.fromkeys(words))


def _pairs(words: list[str]) -> list[str]:
    """Neighbouring English words (Chinese terms are jieba's words and overlapping character bigrams,
    which already say what stands next to what)."""
    latin = [word if word.isascii() else "" for word in words]
    return [f"{a} {b}" for a, b in itertools.pairwise(latin) if a and b]
