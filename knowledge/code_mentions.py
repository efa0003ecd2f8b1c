"""Fault-code mentions in text as the spaCy code linker (`knowledge.code_linker`) reads them,
without importing spaCy (seconds on a cold CLI) for the text where it cannot change the reading.

Text without Chinese in which every code shape stands between spaces or the punctuation spaCy
always splits off, and no known code occurs elsewhere, gives the linker's mentions from its own
pattern alone (`plain_code_mentions`); any other text goes through the linker.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from knowledge.codes import MENTION, canonical_id, common_word, typed_forms

if TYPE_CHECKING:
    from knowledge.code_linker import CodeLinker

# Around a code: prefixes and suffixes that spaCy's English tokenizer splits off in any
# context, so the code's own characters are the span the linker would find.
_OPENERS = frozenset("([{\"'")
_CLOSERS = frozenset(')]}",;:!?')


class CodeMention(NamedTuple):
    start: int
    end: int
    code: str
    canonical_id: str


class CodeMentions:
    """The codes in a text: printed shapes, and `known_codes` wherever they stand alone."""

    def __init__(self, known_codes: Iterable[str] = ()):
        self.printed = frozenset(known_codes)
        # Whitespace-free and lower-case: spaCy's PhraseMatcher compares lower-cased tokens.
        self.known_squeezed = tuple(sorted({_squeeze(code)[0] for code in typed_forms(self.printed)} - {""}))
        self._linker: CodeLinker | None = None
        self._lock = threading.Lock()

    def find(self, text: str, language: str) -> list[CodeMention]:
        if language == "en":
            plain = plain_code_mentions(text, self.known_squeezed, self.printed)
            if plain is not None:
                return plain
        return [CodeMention(m.start, m.end, m.code, m.canonical_id) for m in self.warm().mentions(text, language)]

    def warm(self) -> CodeLinker:
        """The spaCy linker, loaded now, for the text that the plain reading does not cover."""
        with self._lock:
            if self._linker is None:
                from knowledge.code_linker import CodeLinker  # imports spaCy: only for text that needs it

                self._linker = CodeLinker(self.printed)
            return self._linker


def plain_code_mentions(
    text: str, known_squeezed: tuple[str, ...], printed: frozenset[str]
) -> list[CodeMention] | None:
    """The English code linker's mentions, when its tokens cannot change them; else None.

    The linker marks each match of `MENTION` (expanded to whole tokens) and each
    standalone occurrence of a known code (token for token), keeping the longest
    where they overlap. A span that starts and ends on a space, an end of the
    text, or punctuation the tokenizer always splits off is whole tokens as it
    is. So when every match is such a span, and every occurrence of a known code
    (compared without whitespace: a superset of the token matches) lies inside a
    match, touches a letter or digit (not standalone), or is itself such a span
    without whitespace and apart from the others, these spans are the mentions. A known code
    that is a common word is left out as the linker leaves it out (`codes.common_word`, given
    the codes as `printed`).
    """
    if not unicodedata.is_normalized("NFKC", text):  # the linker reads the NFKC form
        return None
    found: list[CodeMention] = []
    for match in MENTION.finditer(text):
        start, end = match.span()
        if not _whole_tokens(text, start, end):
            return None
        group = "bare" if match.group("bare") else "cued"
        found.append(CodeMention(start, end, match.group(0), canonical_id(match.group(group))))
    known: list[CodeMention] = []
    if known_squeezed:
        squeezed, origin = _squeeze(text)
        for code in known_squeezed:
            at = squeezed.find(code)
            while at != -1:
                start, end = origin[at], origin[at + len(code) - 1] + 1
                at = squeezed.find(code, at + 1)
                if any(m.start <= start and end <= m.end for m in found) or _touches_word(text, start, end):
                    continue
                if common_word(text[start:end], printed, text[:start]):
                    continue
                if any(char.isspace() for char in text[start:end]) or not _whole_tokens(text, start, end):
                    return None
                if any(start < m.end and m.start < end for m in found + known):
                    return None
                known.append(CodeMention(start, end, text[start:end], canonical_id(text[start:end])))
    return sorted(found + known, key=lambda m: m.start)


def _whole_tokens(text: str, start: int, end: int) -> bool:
    while start > 0 and text[start - 1] in _OPENERS:
        start -= 1
    while end < len(text) and (text[end] in _CLOSERS or (text[end] == "." and _period_splits_after(text[end - 1]))):
        end += 1
    return (start == 0 or text[start - 1].isspace()) and (end == len(text) or text[end].isspace())


def _period_splits_after(char: str) -> bool:
    return char in _CLOSERS or "0" <= char <= "9" or "a" <= char <= "z"


def _touches_word(text: str, start: int, end: int) -> bool:
    """Next to a letter or digit: the linker does not take a known code there (not standalone)."""
    return (start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum())


def _squeeze(text: str) -> tuple[str, list[int]]:
    """Lower-cased `text` without whitespace, and each of its characters' offset in `text`."""
    chars: list[str] = []
    origin: list[int] = []
    for offset, char in enumerate(text):
        if not char.isspace():
            lowered = char.lower()
            chars.append(lowered)
            origin.extend([offset] * len(lowered))
    return "".join(chars), origin
