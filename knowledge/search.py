"""Reading the manual index: exact code lookup first, then hybrid lexical + semantic search.

Exact lookups never touch the embedding model. Results are collapsed to one
hit per machine scope and code: the requested manual version (or the newest)
in the asker's language, with a note on how the other versions differ.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sqlite3
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from knowledge.codes import (
    DISPLAY_TOKEN,
    MENTION,
    TYPED_TOKEN,
    asked_besides,
    code_key,
    is_named,
    lookalike_keys,
    lookup_keys,
    loose_key,
    scope_key,
)

if TYPE_CHECKING:
    from knowledge.code_linker import CodeLinker
from knowledge.embed import Embedder
from knowledge.glossary import expand, translate_to_english, translations
from knowledge.manual_names import ManualNames
from knowledge.metadata import normalize_version, version_order
from knowledge.models import Hit, Match, SafetyStatement, Scope, SearchResult
from knowledge.onnx_encoder import OnnxEncoder, encoder_path
from knowledge.passages import code_terms
from knowledge.ranking import (
    CODE_LIKE_WORD,
    Group,
    IndexRow,
    Ranked,
    best_passage,
    codes_or_fault_words,
    entries_over_their_pages,
    entry_pages,
    fuse,
    group,
    page_rows,
    snippet,
    word_pairs,
)
from knowledge.rescoring import RESCORED, Question, RowWords, features, rescore
from knowledge.safety import read_statements
from knowledge.text import FTS_TOKENIZER, counted_words, holds, language, stop_words, terms
from knowledge.tuning import Tuning, tuning_for

CANDIDATES = 50
AGREEMENT = 5
# BM25 costs about a microsecond per row a word is on, for every word of the question: the
# rarest words are looked up until this many rows are to be scored. A small library (the dev
# corpus's questions reach 1,600 at most) keeps every word; in a large one, words on thousands
# of rows (motor, alarm) add next to nothing to the ranking and are left out.
POSTINGS_BUDGET = 3000
MAX_TERMS = 32
# A name as questions give one: a capitalised word (Vaillant, KUKA) or a token mixing letters and digits
# (FC302, AL013, A.810, 0x8611).
_NAME = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Z][A-Za-z]{2,}|(?=[A-Za-z.\-]*\d)(?=[\d.\-]*[A-Za-z])[A-Za-z0-9]+(?:[.\-][A-Za-z0-9]+)*)"
    r"(?![A-Za-z0-9])"
)
# The words of rows the second look has read, kept for the next question: a plant's questions come back to
# the same few hundred entries, and a bound keeps a large library from filling memory with them.
ROW_WORDS_KEPT = 5000
Mode = Literal["hybrid", "lexical", "semantic"]
# Embeds questions beside the word search; one thread, as the model allows one encode at a time.
_ENCODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="question-embedding")


class IndexMissing(Exception):
    """There is no usable index file yet."""


@dataclass
class _Snapshot:
    signature: tuple[int, int, int]
    conn: sqlite3.Connection
    rows: dict[int, IndexRow]
    model: str
    names: ManualNames
    ids: np.ndarray | None = None
    vectors: np.ndarray | None = None
    masks: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    entry_pages: dict[Group, set[tuple[str, int]]] | None = None
    page_rows: dict[tuple[str, int], list[IndexRow]] | None = None
    scope_codes: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    doc_counts: dict[str, int] = field(default_factory=dict)
    linker: CodeLinker | None = None
    encoder: OnnxEncoder | None = None
    encoder_checked: bool = False
    positions: dict[int, int] | None = None  # record id -> its row in `vectors`
    row_words: dict[int, RowWords] = field(default_factory=dict)
    words_stored: bool = False  # records.words is there (schema 6)


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


@dataclass(frozen=True)
class _ByWords:
    """What the best rows by words say about a question (`ManualIndex._by_words`)."""

    coverage: float
    answers: frozenset[Group]  # what the best rows by words answer with
    unknown_names: int


@dataclass(frozen=True)
class Candidates:
    """A question's rankings (record id, score; best first) and the evidence for an answer, as `ManualIndex.candidates`
    found them; `ManualIndex.answer` turns them into hits under the index's tuning."""

    asked: str  # as typed
    text: str  # without the manual names it mentions
    language: str
    scope: Scope
    mentioned: frozenset[str]  # sha256 of the manuals it names
    lexical: list[tuple[int, float]]
    semantic: list[tuple[int, float]]
    coded: list[tuple[int, float]]
    cross: list[tuple[Match, list[tuple[int, float]]]]  # the other language's rows, by words and by meaning
    translation: str  # the glossary's rendition of its words in the other language
    vector: np.ndarray | None
    evidence: Evidence
    mode: Mode  # the second look is for a hybrid search; a lexical or semantic one is ranked by that alone
    # The index as it was read: the ids above are its rows, whatever a rebuild swaps in meanwhile.
    snapshot: _Snapshot = field(repr=False, compare=False)


class ManualIndex:
    """`semantic_languages`: the languages the embedding model understands. The bundled
    all-MiniLM-L6-v2 is English-only: its vote on a Chinese query is noise that
    outranks good keyword matches, so other languages are searched lexically."""

    def __init__(
        self,
        path: Path,
        model_path: str | None = None,
        embedder: Embedder | None = None,
        semantic_languages: tuple[str, ...] = ("en",),
        tuning: Tuning | None = None,
    ):
        self.path = Path(path)
        self.embedder = embedder or Embedder(model_path)
        self.semantic_languages = semantic_languages
        self.tuning = tuning or tuning_for(self.embedder.identity)
        self._lock = threading.RLock()
        self._snapshot: _Snapshot | None = None

    # -- public API -------------------------------------------------------

    def codes(self) -> set[str]:
        """Every code in the index as printed; empty while there is no index."""
        try:
            return {
                row["code"]
                for row in self._current().rows.values()
                if row["kind"] == "entry" and not is_named(row["code"])
            }
        except IndexMissing:
            return set()

    def safety(self, manual_sha256: str) -> list[SafetyStatement]:
        """The hazard statements a manual prints (knowledge.safety), in page order."""
        snap = self._current()
        with self._lock:
            return read_statements(snap.conn, manual_sha256)

    @property
    def semantic_ready(self) -> bool:
        """Whether a question can be embedded now without loading a model first."""
        snap = self._snapshot
        return (snap is not None and snap.encoder is not None) or self.embedder.loaded

    def warm(self) -> None:
        """Load now what the first free-text question would wait for: the question encoder (the
        ONNX export, else the model), the vectors, the code linker (spaCy), the Chinese word list
        (jieba), the glossary, and the maps of the rows by page and by vector (at 50,000 rows a
        first question spent 120 ms making those)."""
        snap = self._current()
        if self._encoder(snap) is None:
            self.embedder.load()
        with self._lock:
            self._vectors(snap)
            self._positions(snap)
            self._linker(snap)
        self._entry_pages(snap)
        self._page_rows(snap)
        terms("预热")
        expand("warm up")

    def query(self, text: str, scope: Scope | None = None, version: str | None = None, k: int = 3) -> SearchResult:
        """Free text as a technician types it: a code in it is looked up exactly, the rest searched.
        Codes printed in a usual shape are found without spaCy, so a cold `fixloop search E102`
        stays fast; the linker (codes as the index knows them, loosely typed) loads on demand."""
        snap = self._current()
        mentioned = snap.names.mentioned(text)
        lang = language(text)
        printed = list(dict.fromkeys(m.group(0) for m in MENTION.finditer(text)))  # with its cue: `err 07`
        shown = list(dict.fromkeys(printed + [m.group(0) for m in DISPLAY_TOKEN.finditer(text)]))
        # Typed tokens come last and are never reported as codes not found: `24V` may be no code at all.
        codes = list(dict.fromkeys(shown + [m.group(0) for m in TYPED_TOKEN.finditer(text)]))
        # A code no entry holds is reported only when nothing else answers: its near codes are looked for then.
        code_results = [(code, self._lookup(snap, code, scope, version, lang, k, mentioned)) for code in codes]
        # A machine the question names that no manual is about (`Danfoss FC302 alarm 14`): another machine's
        # code of the same number is no answer. The codes entries hold are no such name (`ALM` of `ALM 5`).
        held = [re.escape(code) for code, result in code_results if result is not None]
        foreign = (
            self._unknown_names(snap, re.sub("|".join(held), " ", text) if held else text)
            if held and not mentioned and not (scope and (scope.vendor or scope.model))
            else []
        )

        def answers(result: SearchResult | None) -> bool:
            return result is not None and not foreign and _answers(result, mentioned)

        answered = next((r for _, r in code_results if answers(r)), None)
        linked: list[str] = []
        if answered is None:
            with self._lock:
                # A short bare number is a code only after a cue word (which the pattern above saw):
                # `blinks 6 times` is no alarm 6.
                linked = [
                    m.code
                    for m in self._linker(snap).mentions(text, lang)
                    if not (m.code.isdigit() and len(m.code) < 3)
                ]
            code_results += [
                (code, self._lookup(snap, code, scope, version, lang, k, mentioned))
                for code in linked
                if code not in codes
            ]
            answered = next((r for _, r in code_results if answers(r)), None)
            if answered is None and not foreign and not linked and _short(text) and self._known(snap, text):
                answered = self._lookup(snap, text, scope, version, lang, k, mentioned)
                linked = [text]  # the whole question is the code
        if answered is not None:
            return self._and_pages(snap, answered, text, codes + linked, scope, version, k, mentioned, lang)
        reported = code_results[: len(shown)] + code_results[len(codes) :]

        def first_code() -> SearchResult:  # its near codes are looked for only now
            listed = next(((code, r) for code, r in reported if r is not None), None) if foreign else None
            if listed is not None:
                return _listed_elsewhere(listed[0], foreign, listed[1])
            code, looked_up = reported[0]
            return looked_up or self._code_not_found(snap, code, scope or Scope())

        if reported and printed and not mentioned and self._only_unknown_codes(snap, text):
            return first_code()  # not a page that shares a word or two with how the code was asked about
        result = self.search(text, scope, version, k=k)
        return first_code() if result.status == "not_found" and reported else result

    def _and_pages(
        self,
        snap: _Snapshot,
        answered: SearchResult,
        text: str,
        codes: list[str],
        scope: Scope | None,
        version: str | None,
        k: int,
        mentioned: set[str],
        lang: str,
    ) -> SearchResult:
        """A code's entries, then what a search of the whole question finds besides them when it asks more
        than the code (`Err18 since the firmware update, which parameter?`): the page that says more, and
        the right page when the code was read into an entry of the wrong table. The manuals it names first."""
        if not set(terms(asked_besides(snap.names.without_names(text)))) - set(terms(" ".join(codes))):
            return answered
        shown = {(hit.manual_sha256, hit.page, hit.fault_code) for hit in answered.hits}
        # By words only: a code's answer stays quick, with no embedding model to load (`fixloop search E102 after
        # the update`). The code was found, so the question has an answer: the not-found floors, which weigh
        # whether it has one, do not apply (an English question about a Chinese note shares few of its words).
        found = self.answer(self.candidates(text, scope, mode="lexical"), version, k, answerable=True).hits
        found = [hit for hit in found if (hit.manual_sha256, hit.page, hit.fault_code) not in shown]
        ordered = sorted(
            [(hit, False) for hit in answered.hits]
            + [(hit, True) for hit in self._prefer_hits(found, mentioned, lang)],
            key=lambda item: (item[0].manual_sha256 not in mentioned, item[1]),
        )
        answered.hits = [hit for hit, _ in ordered][:k]
        return answered

    def _only_unknown_codes(self, snap: _Snapshot, text: str) -> bool:
        """The question asks about its printed codes and nothing else, and no manual prints them:
        not as an entry (looked up before this) nor anywhere in a page's text."""
        if terms(asked_besides(snap.names.without_names(text))):
            return False
        printed = [m.group("bare") or m.group("cued") for m in MENTION.finditer(text)]
        words = list(dict.fromkeys(word for code in printed for word in terms(code)))
        with self._lock:
            return not any(_doc_counts(snap.conn, words).values())

    def _linker(self, snap: _Snapshot) -> CodeLinker:
        if snap.linker is None:
            from knowledge.code_linker import CodeLinker  # spaCy: loaded on the first such question

            snap.linker = CodeLinker(self.codes())
        return snap.linker

    def _prefer(self, result: SearchResult, mentioned: set[str], lang: str) -> SearchResult:
        """Hits from the manuals the question names first (`EP100 err 9`, not alarm 9 of another
        drive), then those in the question's language (`23号报警` on the Chinese controller)."""
        result.hits = self._prefer_hits(result.hits, mentioned, lang)
        return result

    @staticmethod
    def _prefer_hits(hits: list[Hit], mentioned: set[str], lang: str) -> list[Hit]:
        return sorted(hits, key=lambda hit: (hit.manual_sha256 not in mentioned, hit.language != lang))

    def _known(self, snap: _Snapshot, code: str) -> bool:
        with self._lock:
            return bool(self._ids_for(snap, code)[0])

    @classmethod
    def _ids_for(cls, snap: _Snapshot, code: str) -> tuple[list[int], Match]:
        """The entries a typed code names: by its exact keys, else (a `lookalike` match) by the keys
        that drop zero padding and fold 7-segment look-alikes, so an exact code always wins."""
        for key in lookup_keys(code):
            ids = cls._exact_ids(snap, key)
            if ids:
                return ids, "exact"
        for key in lookalike_keys(code):
            ids = cls._loose_ids(snap, key)
            if ids:
                return ids, "lookalike"
        return [], "exact"

    @staticmethod
    def _loose_ids(snap: _Snapshot, key: str) -> list[int]:
        return [
            i
            for (i,) in snap.conn.execute(
                "SELECT id FROM records WHERE loose_key = ? AND kind = 'entry' ORDER BY id", (key,)
            )
        ]

    @classmethod
    def _exact_ids(cls, snap: _Snapshot, key: str) -> list[int]:
        ids = [
            i
            for (i,) in snap.conn.execute(
                "SELECT id FROM records WHERE code_key = ? AND kind = 'entry' ORDER BY id", (key,)
            )
        ]
        if not ids and key.isdigit():  # `01204` is what the HMI shows for the manual's `XX204`
            # `+id`: ordered by the id column itself, SQLite scanned the whole table (60 ms at 50,000 rows) instead
            # of the few rows the code_pattern index holds.
            ids = [
                i
                for (i,) in snap.conn.execute(
                    "SELECT id FROM records WHERE code_pattern > '' AND ? GLOB code_pattern ORDER BY +id", (key,)
                )
            ]
        if ids and key.isdigit():  # one number padded as each manual prints it: `23` is also `0023` there
            ids += [
                i for i in cls._loose_ids(snap, loose_key(key)) if i not in ids and snap.rows[i]["code_key"].isdigit()
            ]
        return ids

    def lookup(
        self, code: str, scope: Scope | None = None, version: str | None = None, language: str | None = None, k: int = 5
    ) -> SearchResult:
        snap = self._current()
        scope = scope or Scope()
        found = self._entries(snap, code, scope, version, language, k)
        return found if found is not None else self._code_not_found(snap, code, scope)

    def _lookup(
        self,
        snap: _Snapshot,
        code: str,
        scope: Scope | None,
        version: str | None,
        lang: str,
        k: int,
        mentioned: set[str],
    ) -> SearchResult | None:
        """A code of a question looked up, the manuals it names first; None when no entry holds it."""
        found = self._entries(snap, code, scope or Scope(), version, lang, k)
        return self._prefer(found, mentioned, lang) if found is not None else None

    def _entries(
        self, snap: _Snapshot, code: str, scope: Scope, version: str | None, language: str | None, k: int
    ) -> SearchResult | None:
        with self._lock:
            ids, match = self._ids_for(snap, code)
        rows = [snap.rows[i] for i in ids]
        if not rows:
            return None
        in_scope = [row for row in rows if _in_scope(row, scope)]
        chosen = in_scope or rows
        hits = self._collapse(snap, [(row, 1.0, match) for row in chosen], scope, version, language or "en", k)
        if not hits:
            return self._version_not_found(snap, code, chosen, version)
        result = SearchResult(status="ok", hits=hits)
        if match == "lookalike":
            printed = ", ".join(dict.fromkeys(hit.fault_code for hit in hits))
            result.message = (
                f"No code {code} is printed in the manuals; read as {printed} (padded, in another notation, or "
                "characters a 7-segment display shows alike)."
            )
            result.suggestion = f"Check that the HMI shows {printed}."
        if scope.label and not in_scope:
            result.message = (
                f"Code {code} is not in the manuals for {scope.label} ({_scope_name(scope)}); "
                f"it is listed for other machines."
            )
            result.suggestion = "These meanings belong to other machines; check the device and the code on the HMI."
        elif len({(h.vendor, h.model) for h in hits}) > 1:
            result.message = f"Code {code} means different things on different machines; each hit names its scope."
            result.suggestion = "Give device_id to get the meaning for one machine."
        return result

    def search(
        self, text: str, scope: Scope | None = None, version: str | None = None, k: int = 3, mode: Mode = "hybrid"
    ) -> SearchResult:
        """Three rankings fused: the question's own words, its meaning (in the languages the
        model reads), and a cross-language ranking of the other language's records — the
        glossary's translation of its words and, for an English-only model, the meaning of its
        English rendition. The last counts less: a Chinese question is first about Chinese pages.
        Then a second look at the best of them (knowledge.rescoring)."""
        return self.answer(self.candidates(text, scope, mode), version, k)

    def candidates(self, text: str, scope: Scope | None = None, mode: Mode = "hybrid") -> Candidates:
        """What the index holds for a question before any constant of the tuning is applied: the
        rankings and the evidence for an answer (`answer` weighs them)."""
        snap = self._current()
        scope = scope or Scope()
        lang = language(text)
        readable = set(self.semantic_languages)
        mentioned = snap.names.mentioned(text)
        named, text = text, snap.names.without_names(text)
        # The question is embedded and compared on another core while SQLite ranks by words (both
        # let go of the GIL).
        rendition = "" if lang in readable else translate_to_english(text)
        asked = text if lang in readable else rendition
        by_vector = _ENCODER.submit(self._meaning, snap, asked, scope) if mode != "lexical" and asked.strip() else None
        lexical = self._lexical(snap, text, scope) if mode != "semantic" else []
        # A printed code (bit20, E-trip, 0023) says more than any word around it: its own ranking.
        coded = (
            self._lexical(snap, text, scope, codes_only=True)
            if mode != "semantic" and CODE_LIKE_WORD.search(text)
            else []
        )
        semantic: list[tuple[int, float]] = []
        rendered: list[tuple[int, float]] = []
        cross: list[tuple[Match, list[tuple[int, float]]]] = []
        other = expand(text)
        translated = (
            [(i, s) for i, s in self._lexical(snap, other, scope) if snap.rows[i]["language"] != lang]
            if mode != "semantic" and other
            else []
        )
        if translated:
            cross.append(("lexical", translated))
        by_words = self._by_words(snap, text, lexical)  # while the question is still being embedded
        vector = None
        if by_vector is not None:
            vector, found = by_vector.result()
            closest = [(i, s) for i, s in found if snap.rows[i]["language"] in readable]
            if lang in readable:
                semantic = closest
            else:  # an English-only model read the question's English rendition: a cross-language ranking
                rendered = [(i, s) for i, s in closest if snap.rows[i]["language"] != lang]
                cross.append(("semantic", rendered))
        by_meaning = semantic or rendered
        return Candidates(
            asked=named,
            text=text,
            language=lang,
            scope=scope,
            mentioned=frozenset(mentioned),
            lexical=lexical,
            semantic=semantic,
            coded=coded,
            cross=cross,
            translation=other,
            vector=vector,
            evidence=self._evidence(snap, text, by_words, by_meaning, translated, named_manual=bool(mentioned)),
            mode=mode,
            snapshot=snap,
        )

    def answer(
        self, found: Candidates, version: str | None = None, k: int = 3, answerable: bool = False
    ) -> SearchResult:
        """The hits for a question's candidates under this index's tuning, or `not_found`. `answerable`: the
        question is known to have an answer, so the evidence for one is not weighed."""
        snap = found.snapshot
        if not answerable and found.evidence.unanswered(self.tuning):
            return SearchResult(
                status="not_found",
                message=f"No manual section matches {found.asked!r}"
                + (f" for {_scope_name(found.scope)}." if found.scope.vendor else "."),
                suggestion="Give the fault code shown on the HMI (e.g. E102), or describe the symptom differently "
                "(which part, what happens, since when).",
            )
        ranked = self.ranked(found)
        text = found.text
        words = frozenset(terms(f"{text} {found.translation}") + code_terms(text, every_token=True) + word_pairs(text))
        hits = self._collapse(snap, ranked, found.scope, version, found.language, k, words)
        if not hits:
            return self._version_not_found(snap, text, [row for row, _, _ in ranked], version)
        return SearchResult(status="ok", hits=hits)

    def ranked(self, found: Candidates) -> Ranked:
        """The candidates as one list, best first: the rankings fused, entries over their pages, a second look
        at the best of them, and the manuals the question names first."""
        snap, rows = found.snapshot, found.snapshot.rows
        ranked = fuse(
            own=[
                ("lexical", [(rows[i], s) for i, s in found.lexical]),
                ("semantic", [(rows[i], s) for i, s in found.semantic]),
                ("lexical", [(rows[i], s) for i, s in found.coded]),
            ],
            cross=[(how, [(rows[i], s) for i, s in ranking]) for how, ranking in found.cross],
            language=found.language,
            about_a_fault=codes_or_fault_words(found.text),
            tuning=self.tuning,
        )
        ranked = sorted(entries_over_their_pages(ranked, self._entry_pages(snap)), key=lambda item: -item[1])
        if found.mode == "hybrid" and any(self.tuning.weights.vector()):
            head = [row for row, _, _ in ranked[:RESCORED]]
            ranked = rescore(ranked, self.features(found, head), self.tuning.weights)
        # A manual the question names comes first: the technician said which machine it is.
        return sorted(ranked, key=lambda item: item[0]["manual_sha256"] not in found.mentioned)

    def features(self, found: Candidates, rows: list[IndexRow]) -> list[tuple[float, ...]]:
        """The second look's features of some of a question's candidate rows (knowledge.rescoring)."""
        snap = found.snapshot
        question = Question.of(found.text, found.translation, found.language)
        similarities = self._similarities(snap, rows, found.vector)
        return [
            features(row, words, question, sim)
            for row, words, sim in zip(rows, self._words_of(snap, rows), similarities, strict=True)
        ]

    def _words_of(self, snap: _Snapshot, rows: list[IndexRow]) -> list[RowWords]:
        with self._lock:
            cold = [row for row in rows if row["id"] not in snap.row_words]
            if len(snap.row_words) + len(cold) > ROW_WORDS_KEPT:
                snap.row_words.clear()
                cold = rows
            if cold:
                snap.row_words.update(self._read_words(snap, cold))
            return [snap.row_words[row["id"]] for row in rows]

    @staticmethod
    def _read_words(snap: _Snapshot, rows: list[IndexRow]) -> dict[int, RowWords]:
        """The rows' words as the build stored them, in one query (an index built before they were stored:
        made from the rows' text)."""
        if not snap.words_stored:
            return {row["id"]: RowWords.of(row) for row in rows}
        ids = [row["id"] for row in rows]
        found = snap.conn.execute(f"SELECT id, words FROM records WHERE id IN ({','.join('?' * len(ids))})", ids)
        return {i: RowWords.stored(words) for i, words in found}

    def _similarities(self, snap: _Snapshot, rows: list[IndexRow], vector: np.ndarray | None) -> list[float]:
        """Each row's cosine with the question (0 for a row that was not embedded, or no question vector)."""
        if vector is None:
            return [0.0] * len(rows)
        with self._lock:
            _, vectors = self._vectors(snap)
            positions = self._positions(snap)
        return [float(vectors[positions[row["id"]]] @ vector) if row["id"] in positions else 0.0 for row in rows]

    def _positions(self, snap: _Snapshot) -> dict[int, int]:
        if snap.positions is None:
            snap.positions = {int(i): n for n, i in enumerate(self._vectors(snap)[0])}
        return snap.positions

    @staticmethod
    def _entry_pages(snap: _Snapshot) -> dict[Group, set[tuple[str, int]]]:
        if snap.entry_pages is None:
            snap.entry_pages = entry_pages(snap.rows.values())
        return snap.entry_pages

    @staticmethod
    def _page_rows(snap: _Snapshot) -> dict[tuple[str, int], list[IndexRow]]:
        if snap.page_rows is None:
            snap.page_rows = page_rows(snap.rows.values())
        return snap.page_rows

    def _evidence(
        self,
        snap: _Snapshot,
        text: str,
        by_words: _ByWords,
        semantic: list[tuple[int, float]],
        translated: list[tuple[int, float]],
        named_manual: bool,
    ) -> Evidence:
        """How close the best match is in meaning, how many of the question's words (or glossary
        concepts) the best rows by words hold, and whether the closest in meaning is also among the
        best by words. The glossary's translation of the words counts only where nothing can be
        compared by meaning (an English question, a Chinese-only library) or the question names its
        manual: across a whole library its general words (battery, pressure) are on too many pages to
        be evidence."""
        return Evidence(
            similarity=semantic[0][1] if semantic else 0.0,
            coverage=by_words.coverage,
            concepts=self._concepts_coverage(snap, text, translated) if named_manual or not semantic else 0.0,
            agreed=bool(semantic) and bool(self._answer_keys(snap, semantic[0][0]) & by_words.answers),
            unknown_names=by_words.unknown_names,
        )

    def _by_words(self, snap: _Snapshot, text: str, lexical: list[tuple[int, float]]) -> _ByWords:
        """The evidence the word search alone gives, gathered before the question's embedding is waited for."""
        return _ByWords(
            coverage=self._coverage(snap, text, lexical),
            answers=frozenset().union(*(self._answer_keys(snap, i) for i, _ in _best_groups(snap, lexical))),
            unknown_names=len(self._unknown_names(snap, text)),
        )

    def _unknown_names(self, snap: _Snapshot, text: str) -> list[str]:
        """The names the question gives (capitalised words, tokens mixing letters and digits) that no row
        of the library holds, neither as a word nor as a code."""
        names = [m.group(0) for m in _NAME.finditer(text) if m.group(0).lower() not in stop_words()]
        unknown = []
        for name in dict.fromkeys(names):
            words = list(dict.fromkeys(terms(name) + code_terms(name, every_token=True)))
            if words and not any(self._counts(snap, words).values()):
                unknown.append(name)
        return unknown

    def _answer_keys(self, snap: _Snapshot, record_id: int) -> set[Group]:
        """What a row answers with: its group, and for an entry the pages it was extracted from
        (an entry and its page are one answer)."""
        row = snap.rows[record_id]
        pages = self._entry_pages(snap).get(group(row), set()) if row["kind"] == "entry" else set()
        return {group(row)} | {("page", sha, page) for sha, page in pages}

    def _coverage(self, snap: _Snapshot, text: str, found: list[tuple[int, float]]) -> float:
        """The largest share of the question's words one of the best rows holds."""
        asked = set(counted_words(text)) | set(code_terms(text))
        if not asked or not found:
            return 0.0
        held = self._row_words(snap, [i for i, _ in _best_groups(snap, found)])
        return max(sum(holds(row_words, word) for word in asked) / len(asked) for row_words in held)

    def _concepts_coverage(self, snap: _Snapshot, text: str, found: list[tuple[int, float]]) -> float:
        """The largest share of the question's glossary concepts one of the best rows holds, in any
        of their translations (a row says 过热 or 温度过高, rarely both)."""
        concepts = [{term for variant in variants for term in terms(variant)} for variants in translations(text)]
        if not concepts or not found:
            return 0.0
        held = self._row_words(snap, [i for i, _ in _best_groups(snap, found)])
        return max(sum(bool(concept & row_words) for concept in concepts) / len(concepts) for row_words in held)

    def _row_words(self, snap: _Snapshot, ids: list[int]) -> list[set[str]]:
        """The index terms of some rows, in the order given, read in one query."""
        with self._lock:
            stored = {
                i: f"{head} {body}"
                for i, head, body in snap.conn.execute(
                    f"SELECT id, lex_head, lex_body FROM records WHERE id IN ({','.join('?' * len(ids))})", ids
                )
            }
        return [set(stored[i].split()) for i in ids]

    # -- retrieval stages -------------------------------------------------

    def _lexical(self, snap: _Snapshot, text: str, scope: Scope, codes_only: bool = False) -> list[tuple[int, float]]:
        """BM25 over the question's words and the display forms of its code-like tokens, or
        (`codes_only`) over those display forms alone; scores as BM25 counts them, higher is better (SQLite's
        `bm25()` is their negative)."""
        words = [] if codes_only else list(dict.fromkeys(terms(text)))
        words = self._informative(snap, list(dict.fromkeys(words + code_terms(text, every_token=True))))
        if not words:
            return []
        expression = " OR ".join(_phrase(w) for w in words)
        sql = (
            "SELECT r.id, -bm25(records_fts, 2.0, 1.0) FROM records_fts JOIN records r ON r.id = records_fts.rowid"
            " WHERE records_fts MATCH ? AND r.vendor_key IN ('', ?) AND r.model_key IN ('', ?)"
            if scope.vendor or scope.model
            else "SELECT rowid, -bm25(records_fts, 2.0, 1.0) FROM records_fts WHERE records_fts MATCH ? AND '' = ? AND '' = ?"
        )
        params = (
            (expression, scope_key(scope.vendor), scope_key(scope.model))
            if scope.vendor or scope.model
            else (expression, "", "")
        )
        with self._lock:
            return [
                (i, score)
                for i, score in snap.conn.execute(
                    f"{sql} ORDER BY bm25(records_fts, 2.0, 1.0) LIMIT {CANDIDATES}", params
                )
            ]

    def _informative(self, snap: _Snapshot, words: list[str]) -> list[str]:
        """The words worth a lookup, rarest first, within the postings budget (the rarest is
        always kept)."""
        if not words:
            return []
        counts = self._counts(snap, words)
        # A word on no row cannot match, yet BM25 would still weigh it on every row that matched.
        ranked = sorted((w for w in words if counts[w]), key=lambda w: counts[w])[:MAX_TERMS]
        kept, postings = ranked[:1], sum(counts[w] for w in ranked[:1])
        for word in ranked[1:]:
            postings += counts[word]
            if postings > POSTINGS_BUDGET:
                break
            kept.append(word)
        return kept

    def _counts(self, snap: _Snapshot, words: list[str]) -> dict[str, int]:
        """How many rows hold each word (kept per snapshot)."""
        with self._lock:
            unknown = [w for w in words if w not in snap.doc_counts]
            if unknown:
                snap.doc_counts.update(_doc_counts(snap.conn, unknown))
            return {w: snap.doc_counts[w] for w in words}

    def _meaning(self, snap: _Snapshot, text: str, scope: Scope) -> tuple[np.ndarray, list[tuple[int, float]]]:
        """The question's vector and the rows closest to it."""
        encoder = self._encoder(snap)
        vector = encoder.encode(text) if encoder is not None else self.embedder.encode([text], query=True)[0]
        return vector, self._semantic(snap, vector, scope)

    def _encoder(self, snap: _Snapshot) -> OnnxEncoder | None:
        """The ONNX export the build left beside the index, if it did (else PyTorch embeds). Looked for under the
        lock once per snapshot, then read without it: the question's thread must not wait while a word search
        holds the lock (at 50,000 rows that wait was a few ms before every encode)."""
        if not snap.encoder_checked:
            with self._lock:
                if not snap.encoder_checked:
                    path = encoder_path(self.path, self.embedder.identity)
                    snap.encoder = OnnxEncoder(path) if path.exists() else None
                    snap.encoder_checked = True
        return snap.encoder

    def _semantic(self, snap: _Snapshot, query: np.ndarray, scope: Scope) -> list[tuple[int, float]]:
        ids, vectors = self._vectors(snap)
        mask = self._mask(snap, scope, ids) if scope.vendor or scope.model else None
        if len(ids) == 0:
            return []
        sims = vectors @ query
        if mask is not None:
            sims = np.where(mask, sims, -1.0)
        top = np.argpartition(-sims, min(CANDIDATES, len(sims) - 1))[:CANDIDATES]
        top = top[np.argsort(-sims[top])]
        return [(int(ids[i]), float(sims[i])) for i in top if sims[i] > -1.0]

    def _collapse(
        self,
        snap: _Snapshot,
        ranked: list[tuple[IndexRow, float, Match]],
        scope: Scope,
        version: str | None,
        lang: str,
        k: int,
        words: frozenset[str] = frozenset(),
    ) -> list[Hit]:
        """One hit per machine and code: the asked-for (or newest) version, in the asker's language."""
        wanted = normalize_version(version) if version else ""
        groups: dict[Group, list[tuple[IndexRow, float, Match]]] = {}
        for item in ranked:
            groups.setdefault(group(item[0]), []).append(item)
        hits: list[Hit] = []
        covered: set[tuple[str, int]] = set()
        for items in groups.values():
            row = items[0][0]
            if row["kind"] == "page":
                if (row["manual_sha256"], row["page"]) in covered:
                    continue  # the entry above already cites this page
                hits.append(self._hit(snap, row, [row], scope, items[0][1], items[0][2], words))
                if len(hits) == k:
                    break
                continue
            siblings = self._siblings(snap, row["vendor_key"], row["model_key"], row["code_key"])
            candidates = [r for r in siblings if r["version"] == wanted] if wanted else siblings
            if not candidates:
                continue
            newest = max(version_order(r["version"]) for r in candidates)
            candidates = [r for r in candidates if version_order(r["version"]) == newest]
            row = next((r for r in candidates if r["language"] == lang), candidates[0])
            score, match = items[0][1], items[0][2]
            hits.append(self._hit(snap, row, siblings, scope, score, match))
            covered.update((row["manual_sha256"], page) for page in json.loads(row["pages"]))
            if len(hits) == k:
                break
        return hits

    def _siblings(self, snap: _Snapshot, vendor_key: str, model_key: str, key: str) -> list[IndexRow]:
        with self._lock:
            return [
                snap.rows[i]
                for (i,) in snap.conn.execute(
                    "SELECT id FROM records WHERE vendor_key = ? AND model_key = ? AND code_key = ? AND kind = 'entry'"
                    " ORDER BY id",
                    (vendor_key, model_key, key),
                )
            ]

    def _hit(
        self,
        snap: _Snapshot,
        row: IndexRow,
        siblings: list[IndexRow],
        scope: Scope,
        score: float,
        match: Match,
        words: frozenset[str] = frozenset(),
    ) -> Hit:
        applies = None
        if scope.vendor or scope.model:
            applies = bool(row["vendor_key"] or row["model_key"]) and _in_scope(row, scope)
        page = row["kind"] == "page"
        if page:
            passages = self._page_rows(snap)[(row["manual_sha256"], row["page"])]
            row = best_passage(self._terms_of(snap, [row, *passages]), words)
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
                f"{row['version'] or 'unversioned'} manual" if page else self._compatibility(snap, row, siblings)
            ),
            kind=row["kind"],
            ocr=bool(row["ocr"]),
            snippet=snippet(row, words),
            language=row["language"],
            page=row["page"],
            pages=json.loads(row["pages"]),
            vendor=row["vendor"],
            model=row["model"],
            scope=_scope_name(Scope(vendor=row["vendor"], model=row["model"])) or "all machines",
            applies_to_device=applies,
            score=round(min(score, 1.0), 4),
            match=match,
        )

    def _terms_of(self, snap: _Snapshot, rows: list[IndexRow]) -> list[tuple[IndexRow, list[str]]]:
        """Rows with the index terms stored for them (what `terms` made of their text)."""
        ids = [row["id"] for row in rows]
        with self._lock:
            stored = dict(
                snap.conn.execute(f"SELECT id, lex_body FROM records WHERE id IN ({','.join('?' * len(ids))})", ids)
            )
        return [(row, stored[row["id"]].split()) for row in rows]

    def _compatibility(self, snap: _Snapshot, row: IndexRow, siblings: list[IndexRow]) -> str:
        versions = sorted({r["version"] for r in siblings if r["version"]}, key=version_order)
        with self._lock:
            manual_versions = sorted(
                {
                    v
                    for (v,) in snap.conn.execute(
                        "SELECT DISTINCT version FROM manuals WHERE vendor = ? AND model = ? AND version != ''",
                        (row["vendor"], row["model"]),
                    )
                },
                key=version_order,
            )
        parts = [
            f"{row['version'] or 'unversioned'} manual"
            + (f" (valid for {row['valid_for']})" if row["valid_for"] else "")
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

    # -- not found --------------------------------------------------------

    def _code_not_found(self, snap: _Snapshot, code: str, scope: Scope) -> SearchResult:
        codes = self._codes_in(snap, scope)
        key = code_key(code)
        prefix = re.sub(r"[^A-Z].*", "", key, flags=re.DOTALL)  # its leading capitals
        near = sorted(
            (k for k in codes if prefix and k.startswith(prefix) and len(k) == len(key)),
            key=lambda k: _distance(k, key),
        )[:5]
        near += [k for k in difflib.get_close_matches(key, list(codes), n=5, cutoff=0.6) if k not in near][
            : 5 - len(near)
        ]
        where = f"the {_scope_name(scope)} manuals" if scope.vendor or scope.model else "the indexed manuals"
        hint = f" Near codes: {', '.join(codes[k] for k in near)}." if near else ""
        return SearchResult(
            status="not_found",
            message=f"No entry for code {code!r} in {where}.{hint}",
            suggestion=(
                f"Check the code on the HMI{' (did you mean ' + codes[near[0]] + '?)' if near else ''}, "
                "or describe the symptom in `query` instead."
            ),
        )

    def _codes_in(self, snap: _Snapshot, scope: Scope) -> dict[str, str]:
        """Code key → code as printed, of the entries in a scope (kept per snapshot: a typo's near
        codes are looked for in every entry)."""
        key = (scope_key(scope.vendor), scope_key(scope.model))
        with self._lock:
            if key not in snap.scope_codes:
                snap.scope_codes[key] = {
                    row["code_key"]: row["code"]
                    for row in snap.rows.values()
                    if row["kind"] == "entry" and _in_scope(row, scope)
                }
            return snap.scope_codes[key]

    def _version_not_found(
        self, snap: _Snapshot, asked: str, rows: list[IndexRow], version: str | None
    ) -> SearchResult:
        available = sorted({r["version"] for r in rows if r["version"]}, key=version_order)
        return SearchResult(
            status="not_found",
            message=f"{asked!r} is not documented in manual version {version}.",
            suggestion=f"Available versions: {', '.join(available) or 'none'}; ask again without manual_version or with one of these.",
        )

    # -- snapshot of the index file ----------------------------------------

    def _current(self) -> _Snapshot:
        """The open index, reopened when a rebuild has swapped a new file in."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            raise IndexMissing(f"no manual index at {self.path}; build it with `fixloop index build PDF...`") from None
        signature = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if self._snapshot is None or self._snapshot.signature != signature:
                # The replaced snapshot is not closed here: a search in another thread may still be
                # reading it. Its connection closes when the last holder lets go (see `_open`).
                self._snapshot = self._open(signature)
            return self._snapshot

    def close(self) -> None:
        """Close the open index file; a later call reopens it."""
        with self._lock:
            if self._snapshot is not None:
                self._snapshot.conn.close()
                self._snapshot = None

    def _open(self, signature: tuple[int, int, int]) -> _Snapshot:
        conn = None
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            # The columns selected are IndexRow's, so each row is one.
            rows = {
                row["id"]: cast(IndexRow, dict(row))
                for row in conn.execute(
                    "SELECT r.id, r.kind, r.manual_sha256, r.code, r.code_key, r.canonical_id, r.title, r.symptom, r.cause,"
                    " r.steps, r.snippet, r.page, r.pages, r.ocr, r.fault, r.vendor, r.model, r.vendor_key, r.model_key,"
                    " r.version, r.language, m.file, m.title AS manual_title, m.valid_for"
                    " FROM records r JOIN manuals m ON m.sha256 = r.manual_sha256"
                )
            }
            manuals = {
                row["sha256"]: dict(row)
                for row in conn.execute("SELECT sha256, file, title, vendor, model, device FROM manuals")
            }
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise IndexMissing(
                f"{self.path} is not a usable manual index ({exc}); rebuild it with `fixloop index build`"
            ) from None
        conn.row_factory = None
        words_stored = any(name == "words" for _, name, *_ in conn.execute("PRAGMA table_info(records)"))
        # Document counts per term, for leaving out words on every page, and a scratch table that
        # stems words as the index did (in this connection's own temporary database: the index
        # file is opened read-only).
        conn.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, records_fts, row)")
        conn.execute(f"CREATE VIRTUAL TABLE temp.stems USING fts5(word, tokenize='{FTS_TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE temp.stem_of USING fts5vocab(temp, stems, instance)")
        snap = _Snapshot(
            signature=signature,
            conn=conn,
            rows=rows,
            model=meta.get("model", ""),
            names=ManualNames(manuals.values(), printed_in=lambda word: self._manuals_printing(conn, word)),
            words_stored=words_stored,
        )
        weakref.finalize(snap, conn.close)
        return snap

    def _manuals_printing(self, conn: sqlite3.Connection, word: str) -> set[str]:
        with self._lock:
            return {
                sha
                for (sha,) in conn.execute(
                    "SELECT DISTINCT r.manual_sha256 FROM records_fts JOIN records r ON r.id = records_fts.rowid"
                    " WHERE records_fts MATCH ?",
                    (_phrase(word),),
                )
            }

    def _vectors(self, snap: _Snapshot) -> tuple[np.ndarray, np.ndarray]:
        """The embedded rows' ids and vectors, read under the lock once per snapshot and without it after that
        (as `_encoder`)."""
        ids, vectors = snap.ids, snap.vectors  # set in this order, and never again
        if ids is None or vectors is None:
            with self._lock:
                return self._read_vectors(snap)
        return ids, vectors

    def _read_vectors(self, snap: _Snapshot) -> tuple[np.ndarray, np.ndarray]:
        if snap.ids is None or snap.vectors is None:
            if snap.model != self.embedder.identity:
                raise IndexMissing(
                    f"{self.path} was embedded with {snap.model!r}, not {self.embedder.identity!r}; "
                    "rebuild it with `fixloop index build`"
                )
            pairs = snap.conn.execute("SELECT id, vector FROM records WHERE vector IS NOT NULL ORDER BY id").fetchall()
            snap.ids = np.array([i for i, _ in pairs], dtype=np.int64)
            snap.vectors = (
                np.vstack([np.frombuffer(v, dtype=np.float32) for _, v in pairs])
                if pairs
                else np.zeros((0, 1), dtype=np.float32)
            )
        return snap.ids, snap.vectors

    @staticmethod
    def _mask(snap: _Snapshot, scope: Scope, ids: np.ndarray) -> np.ndarray:
        """Which embedded rows a scope keeps (without the lock: two threads may both make a scope's mask, alike)."""
        key = (scope_key(scope.vendor), scope_key(scope.model))
        if key not in snap.masks:
            snap.masks[key] = np.array([_in_scope(snap.rows[int(i)], scope) for i in ids], dtype=bool)
        return snap.masks[key]


def _best_groups(snap: _Snapshot, found: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The best row of each of the first few answers (a page's passages are one answer)."""
    seen: set[Group] = set()
    best = []
    for record_id, score in found:
        key = group(snap.rows[record_id])
        if key not in seen:
            seen.add(key)
            best.append((record_id, score))
            if len(best) == AGREEMENT:
                break
    return best


def _doc_counts(conn: sqlite3.Connection, words: list[str]) -> dict[str, int]:
    """How many rows hold each word, looked up under the stem the index stored it as (`motors`
    is counted as `motor`)."""
    conn.execute("DELETE FROM temp.stems")
    conn.executemany("INSERT INTO temp.stems (rowid, word) VALUES (?, ?)", enumerate(words))
    counts = dict.fromkeys(words, 0)
    counts.update(
        (words[row], doc)
        for row, doc in conn.execute(
            "SELECT s.doc, coalesce(v.doc, 0) FROM temp.stem_of s LEFT JOIN temp.vocab v ON v.term = s.term"
        )
    )
    return counts


def _listed_elsewhere(code: str, names: list[str], found: SearchResult) -> SearchResult:
    machines = ", ".join(dict.fromkeys(hit.scope for hit in found.hits))
    return SearchResult(
        status="not_found",
        message=f"No indexed manual is about {' '.join(names)}; code {code} is listed only for other machines ({machines}).",
        suggestion=f"Index the manual of {' '.join(names)}, or give the device_id if it is one of those machines.",
    )


def _phrase(word: str) -> str:
    """A word as an FTS5 query matches it: quoted, so `AND` or `-` in it are no operators."""
    return '"' + word.replace('"', "") + '"'


def _short(text: str) -> bool:
    return 0 < len(text.split()) <= 3 and len(text.strip()) <= 24


def _answers(result: SearchResult, mentioned: set[str]) -> bool:
    """A code lookup answers unless the question names manuals and none of the hits is from them."""
    return result.status == "ok" and (not mentioned or result.hits[0].manual_sha256 in mentioned)


def _in_scope(row: IndexRow, scope: Scope) -> bool:
    return (not scope.vendor or row["vendor_key"] in ("", scope_key(scope.vendor))) and (
        not scope.model or row["model_key"] in ("", scope_key(scope.model))
    )


def _scope_name(scope: Scope) -> str:
    return " ".join(part for part in (scope.vendor, scope.model) if part)


def _distance(a: str, b: str) -> int:
    digits_a, digits_b = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
    return abs(int(digits_a) - int(digits_b)) if digits_a and digits_b else 10**6
