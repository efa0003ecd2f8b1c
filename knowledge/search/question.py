"""A question as every stage of a search reads it, parsed once: its language, the manuals it names and its text
without them, its words, the codes it prints, and whether it is about a fault.

What only some routes need (its words, the glossary's translation, an English rendition) is worked out on first
use and kept: a code's lookup (`fixloop search E102`) cuts no words and loads no glossary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from knowledge.codes import DISPLAY_TOKEN, MENTION, TYPED_TOKEN, asked_besides, code_terms, mentioned_code
from knowledge.glossary import expand, translate_to_english, translations
from knowledge.ingest.languages import question_language
from knowledge.manual_names import ManualNames
from knowledge.text import counted_words, latin_lookalikes, stop_words, terms, word_pairs

# Cue words of a question about a fault (`knowledge.codes.MENTION` finds the codes printed with theirs).
_FAULT_WORDS = re.compile(
    r"\b(?:fault|alarm|trip|error|err|warning|led|blink|flash|shows?|display)|故障|报警|异常|闪", re.I
)
# A token with a letter and a digit, a zero-padded number, or a display code: how codes are printed.
_CODE_LIKE_WORD = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Za-z]+[.\-]?\d+|\d+[A-Za-z]+|0\d+|[A-Za-z]{1,4}[.\-][A-Za-z0-9]{2,})"
    r"(?![A-Za-z0-9])"
)


@dataclass(frozen=True)
class Question:
    asked: str  # as typed
    # Without the manual names it gives: left in, a model name outweighs every other word in BM25.
    text: str
    language: str
    mentioned: frozenset[str]  # sha256 of the manuals it names
    version: str  # the version of them it gives (`V4.0` of `CL57T V4`), as they print it; empty for none
    # The codes it gives: `printed` with their cue where they have one (`err 07`, `E102`), `shown` adds the
    # tokens a display shows (`oH1`), `codes` adds typed tokens (`24V`, which may be no code at all: never
    # reported as a code not found).
    printed: tuple[str, ...]
    shown: tuple[str, ...]
    codes: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, names: ManualNames) -> Question:
        # Its codes are read without the names of the manuals it names: `TW-90` of `E07 on the TW-90` is the
        # product, not a code no manual lists.
        mentioned = frozenset(names.mentioned(text))
        bare = names.without_names(text, mentioned)
        coded = latin_lookalikes(bare)  # `ошибка Е10` typed with a Cyrillic `Е`
        printed = tuple(dict.fromkeys(m.group(0) for m in MENTION.finditer(coded)))
        shown = tuple(dict.fromkeys(printed + tuple(m.group(0) for m in DISPLAY_TOKEN.finditer(coded))))
        return cls(
            asked=text,
            text=bare,
            language=question_language(text),
            mentioned=mentioned,
            version=names.version_asked(text, mentioned),
            printed=printed,
            shown=shown,
            codes=tuple(dict.fromkeys(shown + tuple(m.group(0) for m in TYPED_TOKEN.finditer(coded)))),
        )

    @cached_property
    def besides_codes(self) -> list[str]:
        """The words of what it asks besides its printed codes (and the words around them)."""
        return terms(asked_besides(self.text))

    @cached_property
    def printed_codes(self) -> list[str]:
        """Its printed codes without their cues (`E60` of `error E60`)."""
        return [mentioned_code(m) for m in MENTION.finditer(self.text)]

    @cached_property
    def printed_words(self) -> list[str]:
        """The words of its printed codes, without their cues."""
        return list(dict.fromkeys(word for code in self.printed_codes for word in terms(code)))

    @cached_property
    def words(self) -> list[str]:
        """Its words as the index stores them, and the display forms of its code-like tokens: what BM25 looks up."""
        return list(dict.fromkeys(self._without_stop_words(terms(self.text)) + self.code_words))

    def _without_stop_words(self, words: list[str]) -> list[str]:
        """`terms` leaves out English stop words only (the index keeps the rest): a German question's `der`, `wird`
        and `und` would find every German page."""
        if self.language in ("en", "zh"):
            return words
        stopped = stop_words(self.language)
        return [word for word in words if word not in stopped]

    @cached_property
    def code_words(self) -> list[str]:
        """The display forms of each of its tokens (a printed code says more than any word around it)."""
        return code_terms(self.text, every_token=True)

    @cached_property
    def counted_words(self) -> set[str]:
        """What it says word by word, to count how much of it a row holds."""
        return set(self._without_stop_words(counted_words(self.text))) | set(code_terms(self.text))

    @cached_property
    def concepts(self) -> list[set[str]]:
        """The glossary concepts it is about, each as the terms of all its translations (a row says 过热 or 温度过高);
        not the words every fault table says (`报警`, `更换`): a row that says `replace` answers no `电池更换`."""
        return [
            {term for variant in variants for term in terms(variant)}
            for variants in translations(self.text, generic=False)
        ]

    @cached_property
    def translation(self) -> str:
        """The glossary's rendition of its words in the other language."""
        return expand(self.text)

    @cached_property
    def translated_words(self) -> list[str]:
        translation = self.translation
        return list(dict.fromkeys(terms(translation) + code_terms(translation, every_token=True)))

    @cached_property
    def rendition(self) -> str:
        """In English, for a model that reads English only: a Chinese question's Latin words are names and
        codes, a German question's are German (only its codes are carried over)."""
        return translate_to_english(self.text, words=self.language == "zh")

    @cached_property
    def named(self) -> str:
        """Its text as the names it gives are read from it (`knowledge.search.floors.unknown_names`): a capitalised
        word is a name in English and Chinese, but German capitalises every noun, so there only a token of
        letters and digits is."""
        return self.text.lower() if self.language == "de" else self.text

    @cached_property
    def code_like(self) -> bool:
        """It prints a token shaped like a code (bit20, E-trip, 0023)."""
        return bool(_CODE_LIKE_WORD.search(self.text))

    @cached_property
    def about_a_fault(self) -> bool:
        return bool(MENTION.search(self.text) or _FAULT_WORDS.search(self.text))

    @cached_property
    def hit_words(self) -> frozenset[str]:
        """What a hit's passage and snippet are chosen by: its words, their translation, its tokens' display
        forms and its neighbouring word pairs."""
        return frozenset(terms(f"{self.text} {self.translation}") + self.code_words + word_pairs(terms(self.text)))
