"""Text helpers shared by extraction and search: language, line joining, lexical terms."""

from __future__ import annotations

import importlib.util
import itertools
import re
import threading
import unicodedata
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jieba

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")  # one CJK ideograph
# How SQLite's full-text index splits and stems the words `terms` gives it (`trips` is `trip`).
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
# The lower-case letters words are made of: Latin letters with their marks too (German `füllstand` is one word, not
# an `f` that matches every F a page prints), and Cyrillic ones (a Russian manual's words were no words at all).
LETTERS = "a-zà-öø-ÿßа-яё"
_WORD = re.compile(rf"[{LETTERS}0-9]+(?:[_.][{LETTERS}0-9]+)*")
# Chinese function characters carry no meaning on their own; bigrams across them still count.
_ZH_STOP = set("的了是在和与或及其")


def language(text: str) -> str:
    """`zh` when a noticeable share of letters are CJK, else `en`."""
    letters = sum(1 for c in text if c.isalpha())
    return "zh" if letters and len(CJK.findall(text)) / letters > 0.2 else "en"


def join_lines(text: str) -> str:
    """Undo PDF line wrapping: no space between two CJK characters, one space otherwise."""
    out = ""
    for line in (part.strip() for part in text.splitlines()):
        if not line:
            continue
        if out and not (CJK.match(out[-1]) and CJK.match(line[0])) and not out.endswith(("_", "-")):
            out += " "
        out += line
    return out


def terms(text: str) -> list[str]:
    """Lexical terms for BM25: English words without stop words; for Chinese, jieba's words
    plus character bigrams.

    FTS5's tokenizers see a CJK run as one token, so Chinese is cut into terms here:
    the words jieba finds in search mode (`散热器` and its parts `散热`), so a term
    like `过压` matches inside `直流母线过压保护动作`, and the overlapping bigrams as
    well, which still match where jieba cuts a word it does not know differently in
    the manual and in the question. Index and queries go through this same function.
    """
    text = _folded(text)
    out = _english_words(text)
    for run in _CJK_RUN.findall(text):
        out.extend(w for w in _segmenter().cut_for_search(run) if len(w) > 1)
        out.extend(_char_pairs(run))
    return out


def counted_words(text: str) -> list[str]:
    """What a question says, word by word, to count how much of it a row holds: the English words of `terms`,
    and jieba's Chinese words of two characters or more that are no stop words. `terms` adds the parts of a
    Chinese word and every character pair, so that a manual cut differently still matches; counted as words,
    they would make one Chinese word three or four, most of them pairs across two words that no row prints."""
    text = _folded(text)
    chinese = [w for w in chinese_words(text) if len(w) > 1 and w not in stop_words("zh")]
    return list(dict.fromkeys(_english_words(text) + chinese))


def holds(row_terms: set[str], word: str) -> bool:
    """Whether a row whose `terms` are these holds `word`: as one of them or, for a Chinese word, as each of
    its character pairs (jieba may have cut the row's sentence differently)."""
    return word in row_terms or (bool(_CJK_RUN.fullmatch(word)) and all(p in row_terms for p in _char_pairs(word)))


def holds_compound(row_terms: set[str], word: str, letters: int, share: float) -> bool:
    """`holds`, or, as German writes its nouns together and inflects them, a word of `letters` letters or more is
    held by a term of as many that ends it or that it ends (`Pelletkessel` and `Kessel`), or that shares its first
    `letters` letters and `share` of the shorter word (`Pellets` and `Pellet`, `Störung` and `Störungen`)."""
    if holds(row_terms, word):
        return True
    if len(word) < letters or not word.isalpha():
        return False
    return any(
        word.endswith(term)
        or term.endswith(word)
        or _shared_start(word, term) >= max(letters, share * min(len(word), len(term)))
        for term in row_terms
        if len(term) >= letters and term.isalpha()
    )


def _shared_start(a: str, b: str) -> int:
    return next((n for n, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def word_pairs(words: list[str]) -> list[str]:
    """Neighbouring words as one term: the passage that says `red LED flashes 3` beats the one that says
    `red LED flashes a number of times` for `red LED flashes 3 times`."""
    return [f"{a} {b}" for a, b in itertools.pairwise(words)]


def _folded(text: str) -> str:
    return latin_lookalikes(unicodedata.normalize("NFKC", text)).lower()


# Cyrillic letters that look like Latin ones: a Russian manual prints its display's `E10` with a Cyrillic `Е`, and a
# technician types it with whichever keyboard is at hand. A display shows one letter.
_CYRILLIC, _LATIN = "АВЕКМНОРСТХаеорсху", "ABEKMHOPCTXaeopcxy"
_CYRILLIC_LOOKALIKES = str.maketrans(_CYRILLIC, _LATIN)
_A_LOOKALIKE = re.compile(f"[{_CYRILLIC}]")
_WITH_A_DIGIT = re.compile(r"\w*\d\w*")


def latin_lookalikes(text: str) -> str:
    """The tokens of a text that hold a digit (codes, not words) with their Cyrillic lookalike letters in Latin.
    Every code key and every indexed text passes here: one with no such letter is returned as it is."""
    if _A_LOOKALIKE.search(text) is None:
        return text
    return _WITH_A_DIGIT.sub(lambda token: token.group(0).translate(_CYRILLIC_LOOKALIKES), text)


def _english_words(folded: str) -> list[str]:
    """The words outside CJK runs of a folded text, without stop words."""
    stopped = stop_words()
    return [w for w in _WORD.findall(_CJK_RUN.sub(" ", folded)) if w not in stopped]


def _char_pairs(run: str) -> list[str]:
    """The overlapping character pairs of a CJK run, across its function characters (a run of one: itself)."""
    chars = [c for c in run if c not in _ZH_STOP] if len(run) > 2 else list(run)
    return chars if len(chars) == 1 else ["".join(p) for p in itertools.pairwise(chars)]


def stem(word: str) -> str:
    """A light English stemmer: the inflections an answer changes ("overheating", "overheated",
    "overheats" are "overheat"; "stopped" is "stop"), nothing that changes the word class."""
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s"):
        base = word[: -len(suffix)]
        if not word.endswith(suffix) or len(base) < 3:
            continue
        if suffix == "s" and word.endswith(("ss", "us", "is")):  # press, status, axis
            continue
        if suffix == "ed" and base.endswith("e"):  # speed, feed
            continue
        if suffix in ("ies", "ied"):
            base += "y"
        elif len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":  # stopp-ed, runn-ing
            base = base[:-1]
        word = base
        break
    if word.endswith("e") and len(word) >= 4:  # replace / replac-ed
        word = word[:-1]
    if word.endswith("y") and len(word) >= 3:  # battery / batteri-es
        word = word[:-1] + "i"
    return word


def chinese_words(text: str) -> list[str]:
    """jieba's words (precise mode, each character once) for every CJK run of `text`, in order; the
    same private segmenter as `terms`, so an answer and the manual are cut alike."""
    return [word for run in _CJK_RUN.findall(text) for word in _segmenter().cut(run)]


@cache
def stop_words(lang: str = "en") -> frozenset[str]:
    """spaCy's stop words of a language (`en`, `de`, ...), read from their own module file: importing spaCy
    costs about a second (it pulls in torch), which a fault-code lookup that reads a word or two must not pay."""
    spec = importlib.util.find_spec("spacy")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fixloop needs spaCy's stop words: pip install spacy")
    path = Path(spec.submodule_search_locations[0]) / "lang" / lang / "stop_words.py"
    module_spec = importlib.util.spec_from_file_location(f"fixloop_stop_words_{lang}", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return frozenset(module.STOP_WORDS)


_segmenter_lock = threading.Lock()


def _segmenter() -> jieba.Tokenizer:
    # The lock keeps two threads from both spending the second it takes to build.
    with _segmenter_lock:
        return _build_segmenter()


@lru_cache(maxsize=1)
def _build_segmenter() -> jieba.Tokenizer:
    """jieba with its bundled dictionary only, built on the first Chinese text (about a second).

    A private Tokenizer, so words another module adds to jieba's global one cannot make the
    index and the queries cut differently. Its prefix dictionary is built in memory rather
    than through `initialize()`, which would write a 9 MB cache file to the temp directory:
    the service user may not write there (or gets a private one per start), and reading
    that cache back costs about as long as building it.
    """
    import jieba

    segmenter = jieba.Tokenizer()
    segmenter.FREQ, segmenter.total = segmenter.gen_pfdict(segmenter.get_dict_file())
    segmenter.initialized = True
    return segmenter
