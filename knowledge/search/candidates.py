"""A question's candidates: four rankings of the index's rows, and the evidence for an answer, before any fitted
constant is applied (`ranking.py` fuses them, `floors.py` weighs the evidence).

- BM25 over the question's words and its tokens' display forms;
- BM25 over those display forms alone: a printed code (bit20, E-trip, 0023) says more than any word around it;
- the question's meaning, in the languages the embedding model reads;
- the other language's rows: by the glossary's translation of its words and, for an English-only model, by
  the meaning of its English rendition.

The question is embedded on another core while SQLite ranks by words (both let go of the GIL).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np

from knowledge.embed import Embedder
from knowledge.models import Match, Scope
from knowledge.search.floors import (
    Evidence,
    machines_named,
    unknown_names,
    unread_share,
    without_words,
    words_no_row_holds,
    written_share,
)
from knowledge.search.question import Question
from knowledge.search.rows import Group, Ranking, group
from knowledge.search.store import Snapshot
from knowledge.text import holds, holds_compound
from knowledge.tuning import Tuning

Mode = Literal["hybrid", "lexical", "semantic"]
# Embeds questions beside the word search; one thread, as the model allows one encode at a time.
_ENCODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="question-embedding")


@dataclass(frozen=True)
class Candidates:
    """A question's rankings (record id, score; best first) and the evidence for an answer;
    `ManualIndex.answer` turns them into hits under the index's tuning."""

    question: Question
    scope: Scope
    lexical: Ranking
    semantic: Ranking
    coded: Ranking
    cross: list[tuple[Match, Ranking]]  # the other language's rows, by words and by meaning
    evidence: Evidence
    mode: Mode  # a lexical or semantic search is ranked by that alone
    # The index as it was read: the ids above are its rows, whatever a rebuild swaps in meanwhile.
    snapshot: Snapshot = field(repr=False, compare=False)


@dataclass(frozen=True)
class _WordEvidence:
    """What the best rows by words say about a question, gathered while it is still being embedded."""

    coverage: float
    answers: frozenset[Group]  # what the best rows by words answer with
    unknown_names: int


def gather(
    snap: Snapshot,
    question: Question,
    scope: Scope,
    mode: Mode,
    embedder: Embedder,
    readable: set[str],
    tuning: Tuning,
) -> Candidates:
    """`readable`: the languages the embedding model understands (another language's question is compared by
    meaning through its English rendition)."""
    lang, text = question.language, question.text
    asked = text if lang in readable else question.rendition
    unread = words_no_row_holds(snap, question, scope) if mode == "hybrid" else []
    without = without_words(asked, unread, lang in readable) if unread else None
    by_vector = (
        _ENCODER.submit(_meaning, snap, embedder, asked, scope, tuning) if mode != "lexical" and asked.strip() else None
    )
    lexical = _by_words(snap, question.words, scope, tuning) if mode != "semantic" else []
    coded = _by_words(snap, question.code_words, scope, tuning) if mode != "semantic" and question.code_like else []
    semantic: Ranking = []
    rendered: Ranking = []
    cross: list[tuple[Match, Ranking]] = []
    translated = (
        [
            (i, s)
            for i, s in _by_words(snap, question.translated_words, scope, tuning)
            if snap.rows[i]["language"] != lang
        ]
        if mode != "semantic" and question.translation
        else []
    )
    if translated:
        cross.append(("lexical", translated))
    words = _word_evidence(snap, question, scope, lexical, tuning)
    measure: Callable[[], float] | None = None  # the unread share by meaning, measured when an answer turns on it
    if by_vector is not None:
        found, vector = by_vector.result()
        if without is not None and without != asked:  # words the model does not read weigh nothing
            measure = partial(_unread_share, snap, embedder, vector, without)
        closest = [(i, s) for i, s in found if snap.rows[i]["language"] in readable]
        if lang in readable:
            semantic = closest
        else:  # an English-only model read the question's English rendition: a cross-language ranking
            rendered = [(i, s) for i, s in closest if snap.rows[i]["language"] != lang]
            cross.append(("semantic", rendered))
    # Where the words no row holds are not in the rendition the model read (the glossary does not know them), the
    # model cannot weigh them: a kind of machine among them (`叉车`, `打印机`) is what the question is about, and
    # weighs its share of the question's letters.
    share = written_share(question.text, machines_named(unread)) if unread and without == asked else 0.0
    return Candidates(
        question=question,
        scope=scope,
        lexical=lexical,
        semantic=semantic,
        coded=coded,
        cross=cross,
        evidence=_evidence(snap, question, words, semantic or rendered, translated, share, measure, tuning),
        mode=mode,
        snapshot=snap,
    )


# -- rankings -----------------------------------------------------------------


def _by_words(snap: Snapshot, words: list[str], scope: Scope, tuning: Tuning) -> Ranking:
    """BM25 over the words worth a lookup."""
    kept = _informative(snap, words, tuning)
    return snap.bm25(kept, scope, tuning.candidates, tuning.bm25_columns) if kept else []


def _informative(snap: Snapshot, words: list[str], tuning: Tuning) -> list[str]:
    """The words worth a lookup, rarest first, within the postings budget (the rarest is always kept)."""
    if not words:
        return []
    counts = snap.counts(words)
    # A word on no row cannot match, yet BM25 would still weigh it on every row that matched.
    ranked = sorted((w for w in words if counts[w]), key=lambda w: counts[w])[: tuning.max_terms]
    kept, postings = ranked[:1], sum(counts[w] for w in ranked[:1])
    for word in ranked[1:]:
        postings += counts[word]
        if postings > tuning.postings_budget:
            break
        kept.append(word)
    return kept


def _meaning(snap: Snapshot, embedder: Embedder, text: str, scope: Scope, tuning: Tuning) -> tuple[Ranking, np.ndarray]:
    """The rows closest to a text in meaning, and its vector."""
    vector = _embedded(snap, embedder, text)
    ids, vectors = snap.vectors()
    if len(ids) == 0:
        return [], vector
    if scope.vendor or scope.model:
        kept = snap.in_scope(scope, ids)
        # A machine's rows are few of a library's: multiplying theirs alone saves the rest of the product (about
        # 3 ms at 50,000 rows, and the memory traffic that slowed the word search beside it), while copying most
        # of the library's vectors costs more than it saves.
        sims = vectors[kept] @ vector if 2 * len(kept) < len(ids) else (vectors @ vector)[kept]
        ids = ids[kept]
    else:
        sims = vectors @ vector
    if len(ids) == 0:
        return [], vector
    n = tuning.candidates
    top = np.argpartition(-sims, min(n, len(sims) - 1))[:n]
    top = top[np.argsort(-sims[top])]
    return [(int(ids[i]), float(sims[i])) for i in top], vector


def _unread_share(snap: Snapshot, embedder: Embedder, vector: np.ndarray, without: str) -> float:
    """The share of a text's meaning (`vector`) that words no row holds carry: embedded `without` them, on the
    encoder's thread."""
    if not without.strip():
        return unread_share(vector, None)
    return unread_share(vector, _ENCODER.submit(_embedded, snap, embedder, without).result())


def _embedded(snap: Snapshot, embedder: Embedder, text: str) -> np.ndarray:
    """A question's vector (the ONNX export embeds it where the build left one)."""
    encoder = snap.encoder()
    return encoder.encode(text) if encoder is not None else embedder.encode([text], query=True)[0]


# -- evidence -----------------------------------------------------------------


def _word_evidence(snap: Snapshot, question: Question, scope: Scope, lexical: Ranking, tuning: Tuning) -> _WordEvidence:
    best = _best_groups(snap, lexical, tuning)
    return _WordEvidence(
        coverage=_coverage(snap, question, best, tuning),
        answers=frozenset().union(*(_answer_keys(snap, i) for i, _ in best)),
        unknown_names=len(unknown_names(snap, question.named, scope.label)),
    )


def _evidence(
    snap: Snapshot,
    question: Question,
    words: _WordEvidence,
    semantic: Ranking,
    translated: Ranking,
    unread: float,
    measure_unread: Callable[[], float] | None,
    tuning: Tuning,
) -> Evidence:
    """How close the best match is in meaning, how many of the question's words (or glossary concepts) the best
    rows by words hold, and whether the closest in meaning is also among the best by words. The glossary's
    translation of the words counts only where nothing can be compared by meaning (an English question, a
    Chinese-only library) or the question names its manual: across a whole library its general words
    (battery, pressure) are on too many pages to be evidence."""
    return Evidence(
        similarity=semantic[0][1] if semantic else 0.0,
        coverage=words.coverage,
        concepts=_concepts_coverage(snap, question, translated, tuning) if question.mentioned or not semantic else 0.0,
        agreed=bool(semantic) and bool(_answer_keys(snap, semantic[0][0]) & words.answers),
        unknown_names=words.unknown_names,
        unread=unread,
        measure_unread=measure_unread,
    )


def _best_groups(snap: Snapshot, found: Ranking, tuning: Tuning) -> Ranking:
    """The best row of each of the first few answers (a page's passages are one answer)."""
    seen: set[Group] = set()
    best = []
    for record_id, score in found:
        key = group(snap.rows[record_id])
        if key not in seen:
            seen.add(key)
            best.append((record_id, score))
            if len(best) == tuning.agreement:
                break
    return best


def _answer_keys(snap: Snapshot, record_id: int) -> set[Group]:
    """What a row answers with: its group, and for an entry the pages it was extracted from (an entry and its
    page are one answer)."""
    row = snap.rows[record_id]
    pages = snap.entry_pages().get(group(row), set()) if row["kind"] == "entry" else set()
    return {group(row)} | {("page", sha, page) for sha, page in pages}


def _coverage(snap: Snapshot, question: Question, best: Ranking, tuning: Tuning) -> float:
    """The largest share of the question's words one of the best rows holds; of a German question, as the parts
    and inflections of its words too (`holds_compound`)."""
    asked = question.counted_words
    if not asked or not best:
        return 0.0
    held_by = (
        partial(holds_compound, letters=tuning.compound_letters, share=tuning.compound_share)
        if question.language == "de"
        else holds
    )
    held = snap.index_terms([i for i, _ in best])
    return max(sum(held_by(row_words, word) for word in asked) / len(asked) for row_words in held)


def _concepts_coverage(snap: Snapshot, question: Question, found: Ranking, tuning: Tuning) -> float:
    """The largest share of the question's glossary concepts one of the best rows holds, in any of their
    translations (a row says 过热 or 温度过高, rarely both)."""
    concepts = question.concepts
    if not concepts or not found:
        return 0.0
    held = snap.index_terms([i for i, _ in _best_groups(snap, found, tuning)])
    return max(sum(bool(concept & row_words) for concept in concepts) / len(concepts) for row_words in held)
