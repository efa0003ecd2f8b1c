"""Bilingual maintenance glossary: find fault-table concepts in a query, in English or Chinese.

A Chinese question about an English manual (and the reverse) shares no words with
it; `expand` adds the other language's words for every concept found, so the
lexical search can meet the manual halfway. `translate_to_english` renders a
Chinese query in English for an embedding model that only reads English.
The concepts live in `glossary.toml` beside this module.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# Codes, part numbers and Latin words a Chinese query carries over as written: E102, OL-br, 0x3022, CAN.
_LATIN = re.compile(r"[a-z0-9]+(?:[._\-][a-z0-9]+)*", re.IGNORECASE)


@dataclass(frozen=True)
class Concept:
    name: str
    en: tuple[str, ...]
    zh: tuple[str, ...]


def expand(text: str) -> str:
    """The other language's variants of every concept in `text`, space-joined, to add to a lexical query.

    English found in the text adds the Chinese variants and Chinese found adds the
    English ones; text mixing both gets both. Empty when no concept is found.
    """
    out: list[str] = []
    for concept, matched in _find(text):
        out.extend(concept.en if _CJK.search(matched) else concept.zh)
    return " ".join(dict.fromkeys(out))


def translate_to_english(text: str) -> str:
    """An English rendition of a (mostly) Chinese query: each concept's English name and
    every Latin token (codes, model names), in the order they appear. Chinese words the
    glossary does not know are left out; English concept words are kept as written."""
    text = _normalize(text)
    out: list[str] = []
    position = 0
    for match in _pattern().finditer(text):
        out.extend(_LATIN.findall(text, position, match.start()))
        concept = _concepts()[_variant_owner()[match.lastindex - 1]]
        out.append(concept.en[0] if _CJK.search(match.group()) else match.group())
        position = match.end()
    out.extend(_LATIN.findall(text, position))
    return " ".join(dict.fromkeys(out))


def _find(text: str) -> list[tuple[Concept, str]]:
    """Concepts in order of appearance with the text that matched; overlapping variants: longest wins."""
    owners = _variant_owner()
    return [(_concepts()[owners[m.lastindex - 1]], m.group()) for m in _pattern().finditer(_normalize(text))]


def _normalize(text: str) -> str:
    # Full-width Latin letters and digits (ＯＬ－ｂｒ) are common in Chinese text.
    return unicodedata.normalize("NFKC", text)


@lru_cache(maxsize=1)
def _concepts() -> tuple[Concept, ...]:
    data = tomllib.loads(resources.files("knowledge").joinpath("glossary.toml").read_text(encoding="utf-8"))
    return tuple(Concept(name, tuple(entry["en"]), tuple(entry["zh"])) for name, entry in data["concepts"].items())


@lru_cache(maxsize=1)
def _variants() -> tuple[tuple[str, int], ...]:
    """(variant, concept index), longest first: the regex tries alternatives in order, so the
    first that matches at a position is the longest ("温度过高" before "温度")."""
    pairs = {(v, i) for i, c in enumerate(_concepts()) for v in (*c.en, *c.zh)}
    return tuple(sorted(pairs, key=lambda pair: (-len(pair[0]), pair)))


@lru_cache(maxsize=1)
def _variant_owner() -> tuple[int, ...]:
    return tuple(i for _, i in _variants())


@lru_cache(maxsize=1)
def _pattern() -> re.Pattern[str]:
    """One alternation with a capturing group per variant, so `lastindex` names the variant."""
    return re.compile("|".join(f"({_variant_regex(v)})" for v, _ in _variants()), re.IGNORECASE)


def _variant_regex(variant: str) -> str:
    if _CJK.search(variant):
        return re.escape(variant)
    # Words apart, hyphenated or run together; a plural, -ing or -ed ending; not inside a longer word.
    words = [re.escape(w) for w in re.split(r"[\s\-]+", variant)]
    return r"(?<![a-z0-9])" + r"[\s\-]*".join(words) + r"(?:s|es|ing|ed)?(?![a-z0-9])"
