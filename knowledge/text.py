"""Text helpers shared by extraction and search: language, line joining, lexical terms."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9]+(?:[_.][a-z0-9]+)*")
# Chinese function characters carry no meaning on their own; bigrams across them still count.
_ZH_STOP = set("的了是在和与或及其")


def language(text: str) -> str:
    """`zh` when a noticeable share of letters are CJK, else `en`."""
    letters = sum(1 for c in text if c.isalpha())
    return "zh" if letters and len(_CJK.findall(text)) / letters > 0.2 else "en"


def join_lines(text: str) -> str:
    """Undo PDF line wrapping: no space between two CJK characters, one space otherwise."""
    out = ""
    for line in (part.strip() for part in text.splitlines()):
        if not line:
            continue
        if out and not (_CJK.match(out[-1]) and _CJK.match(line[0])) and not out.endswith(("_", "-")):
            out += " "
        out += line
    return out


def terms(text: str) -> list[str]:
    """Lexical terms for BM25: English words without stop words, Chinese character bigrams.

    FTS5's tokenizers see a CJK run as one token, so Chinese text is indexed
    as overlapping bigrams (and single characters for one-character runs).
    """
    text = unicodedata.normalize("NFKC", text).lower()
    stop_words = _english_stop_words()
    out = [w for w in _WORD.findall(_CJK_RUN.sub(" ", text)) if w not in stop_words]
    for run in _CJK_RUN.findall(text):
        chars = [c for c in run if c not in _ZH_STOP] if len(run) > 2 else list(run)
        out.extend(chars if len(chars) == 1 else ("".join(p) for p in zip(chars, chars[1:])))
    return out


@lru_cache(maxsize=1)
def _english_stop_words() -> frozenset[str]:
    # Importing spaCy costs about a second (it pulls in torch): not at service start-up, only on first use.
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)
