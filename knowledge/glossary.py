"""Maintenance glossary: find fault-table concepts in a query, in English, Chinese or German.

A Chinese or German question about an English manual (and every other pairing) shares no words with it;
`expand` adds the other languages' words for every concept found, so the lexical search can meet the manual
halfway. `translate_to_english` renders a Chinese or German query in English for an embedding model that only
reads English. The concepts live in `glossary.toml` beside this module.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from knowledge.text import CJK

# Codes, part numbers and Latin words a Chinese query carries over as written: E102, OL-br, 0x3022, CAN.
_LATIN = re.compile(r"[a-z0-9]+(?:[._\-][a-z0-9]+)*", re.IGNORECASE)


LANGUAGES = ("en", "zh", "de")
# A German variant this long is found inside a compound as well (`Zwischenkreisüberspannung` says
# `Überspannung`): German writes its nouns together. A shorter one (`Halt` of `Haltemoment`) only as a word.
_COMPOUND_PART = 5


@dataclass(frozen=True)
class Concept:
    name: str
    en: tuple[str, ...]
    zh: tuple[str, ...]
    de: tuple[str, ...] = ()
    generic: bool = False  # a word every fault table uses (alarm, cause, replace): `glossary.toml`

    def variants(self, language: str) -> tuple[str, ...]:
        return tuple(getattr(self, language))

    def written_in(self, variant: str) -> frozenset[str]:
        """The languages that write this variant of the concept (`Motor` is English and German)."""
        folded = variant.casefold()
        return frozenset(lang for lang in LANGUAGES if folded in {v.casefold() for v in self.variants(lang)})


@lru_cache(maxsize=1024)
def expand(text: str) -> str:
    """The other languages' variants of every concept in `text`, space-joined, to add to a lexical query.

    English found in the text adds the Chinese and German variants, Chinese found the English and German ones,
    and so on; text mixing languages gets each. Empty when no concept is found.
    """
    return " ".join(dict.fromkeys(variant for variants in translations(text) for variant in variants))


@lru_cache(maxsize=1024)
def translations(text: str, generic: bool = True) -> tuple[tuple[str, ...], ...]:
    """Per concept found in `text`, in order, its variants in the languages other than the one(s) it was written
    in. Without `generic`, only the concepts that tell one fault from another (not `alarm`, `cause`, `replace`)."""
    return tuple(
        dict.fromkeys(
            tuple(variant for lang in LANGUAGES if lang not in written for variant in concept.variants(lang))
            for match, concept, written in _written(text)
            if generic or not concept.generic
        )
    )


def concepts(text: str) -> list[tuple[int, int, str]]:
    """Each concept found in `text`: its span (offsets into the NFKC form of `text`) and the concept's
    name, in order of appearance; the same name for an English and a Chinese variant ("overheating",
    "过热"), so two texts can be compared by what they talk about across languages and inflections."""
    return [(match.start(), match.end(), concept.name) for match, concept in _matches(_normalize(text))]


def written_form(name: str, language: str) -> str:
    """How manuals write the concept `name` in `language` ("en", "zh" or "de"): its first variant there (English
    where the glossary has none in that language)."""
    concept = next(c for c in _concepts() if c.name == name)
    return (concept.variants(language) or concept.en)[0]


def mentions(text: str, name: str) -> bool:
    """Whether `text` names the concept `name` in either language. Much cheaper than `concepts` on a long
    text: one concept's variants, not the whole glossary's."""
    return _concept_pattern(name).search(_normalize(text)) is not None


@lru_cache(maxsize=1024)
def translate_to_english(text: str, words: bool = True) -> str:
    """An English rendition of a (mostly) Chinese or German query: each concept's English name and
    every Latin token (codes, model names), in the order they appear. Chinese words the
    glossary does not know are left out; English concept words are kept as written. Without `words`, a Latin
    token is carried over only as a code or an acronym (a digit in it, or capitals: `E07`, `IGBT`): a German
    question's other words are German, which a model that reads English misreads."""
    text = _normalize(text)
    out: list[str] = []
    position = 0
    for match, concept, written in _written(text):
        out.extend(_carried(text, position, match.start(), words))
        out.append(match.group() if "en" in written else concept.en[0])
        position = match.end()
    out.extend(_carried(text, position, len(text), words))
    return " ".join(dict.fromkeys(out))


def _carried(text: str, start: int, end: int, words: bool) -> list[str]:
    tokens = _LATIN.findall(text, start, end)
    return tokens if words else [t for t in tokens if any(c.isdigit() for c in t) or (len(t) > 1 and t.isupper())]


def _normalize(text: str) -> str:
    # Full-width Latin letters and digits (ＯＬ－ｂｒ) are common in Chinese text.
    return unicodedata.normalize("NFKC", text)


def _written(text: str) -> Iterator[tuple[re.Match[str], Concept, frozenset[str]]]:
    """Concept variants in order of appearance in the NFKC form of `text`, each with the languages that write
    it."""
    for match, concept in _matches(_normalize(text)):
        yield match, concept, concept.written_in(match.group())


def _matches(text: str) -> Iterator[tuple[re.Match[str], Concept]]:
    """Concept variants in order of appearance; where variants overlap, the longest."""
    patterns = _matcher()
    position = 0
    while position < len(text):
        found = patterns.get(text[position].lower())
        match = found[0].match(text, position) if found else None
        if match is None or found is None:
            position += 1
            continue
        assert match.lastindex is not None  # every alternative is a group
        yield match, found[1][match.lastindex - 1]
        position = match.end()


@lru_cache(maxsize=1)
def _concepts() -> tuple[Concept, ...]:
    data = tomllib.loads(resources.files("knowledge").joinpath("glossary.toml").read_text(encoding="utf-8"))
    return tuple(
        Concept(name, tuple(entry["en"]), tuple(entry["zh"]), tuple(entry.get("de", ())), entry.get("generic", False))
        for name, entry in data["concepts"].items()
    )


@lru_cache(maxsize=1)
def _matcher() -> dict[str, tuple[re.Pattern[str], tuple[Concept, ...]]]:
    """Per first character, one alternation of the variants that start with it, with a capturing group
    per variant, so `lastindex` says which matched, and the concept owning each group. Only the
    variants that can start at a position are tried there (one alternation of all of them costs a
    third of a millisecond per character). Alternatives are tried in order, so longest first: at a
    given position the longest variant wins ("温度过高" before "温度")."""
    known = _concepts()
    variants = sorted(
        {(v, i) for i, c in enumerate(known) for v in (*c.en, *c.zh, *c.de)}, key=lambda pair: (-len(pair[0]), pair)
    )
    by_first: dict[str, list[tuple[str, int]]] = {}
    for variant, owner in variants:
        by_first.setdefault(variant[0].lower(), []).append((variant, owner))
    return {
        first: (
            re.compile("|".join(f"({_variant_regex(v, known[i])})" for v, i in group), re.IGNORECASE),
            tuple(known[i] for _, i in group),
        )
        for first, group in by_first.items()
    }


@lru_cache(maxsize=256)
def _concept_pattern(name: str) -> re.Pattern[str]:
    concept = next(c for c in _concepts() if c.name == name)
    variants = (*concept.en, *concept.zh, *concept.de)
    return re.compile("|".join(_variant_regex(v, concept) for v in variants), re.IGNORECASE)


def _variant_regex(variant: str, concept: Concept) -> str:
    if CJK.search(variant):
        return re.escape(variant)
    # Words apart, hyphenated or run together.
    words = r"[\s\-]*".join(re.escape(w) for w in re.split(r"[\s\-]+", variant))
    if concept.written_in(variant) == {"de"} and len(variant) >= _COMPOUND_PART:
        return words  # also inside a compound
    # A plural, -ing or -ed ending; not inside a longer word.
    return r"(?<![a-z0-9])" + words + r"(?:s|es|ing|ed)?(?![a-z0-9])"
