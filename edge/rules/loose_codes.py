"""Fault codes typed loosely, matched to the codes the manuals know.

On a tablet a code comes out as `E 104`, `e.103`, `E1O2` (a letter O for a
zero), `El04` (a letter l for a one) or `6O65`. The code linker reads the
shapes manuals print; these are looked up instead, never guessed: a token
counts as a code only when its key, or its key with look-alike characters
folded (`knowledge.codes.loose_key`), is the key of a code the manuals know.
A cue word typed before the number can stand for the code's letter: `err-102`
and `ERR 105` are `E102` and `E105` when the manuals know no `Err-102`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from knowledge.codes import CUE_EN, code_key, loose_key

# Up to three letters, one separator, then digits or the letters typed for them (O, o, I, l).
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]{1,3}[\s._\-]?)?[0-9OoIl]{2,5}(?![A-Za-z0-9])")
_CUED_NUMBER = re.compile(rf"^\s*({CUE_EN})[\s._:：#\-]*([0-9OoIl]{{2,5}})\s*$", re.I)


class LooseCode(NamedTuple):
    start: int
    end: int
    code: str  # as the manuals print it


class LooseCodes:
    def __init__(self, known_codes: Iterable[str]):
        exact: dict[str, str] = {}
        folded: dict[str, str] = {}
        for code in sorted(known_codes):
            exact.setdefault(code_key(code), code)
            folded.setdefault(_folded(code), code)
        self._exact = exact
        self._folded = folded

    def resolve(self, typed: str) -> str | None:
        """The known code that `typed` is, typed loosely; None if it is none."""
        known = self._exact.get(code_key(typed)) or self._folded.get(_folded(typed))
        cued = _CUED_NUMBER.match(typed) if known is None else None
        if cued is None:
            return known
        lettered = cued.group(1)[0] + cued.group(2)
        return self._exact.get(code_key(lettered)) or self._folded.get(_folded(lettered))

    def find(self, text: str) -> list[LooseCode]:
        """Known codes typed loosely in `text`; offsets are `text`'s (full-width forms are read as NFKC)."""
        found = []
        normalised = unicodedata.normalize("NFKC", text)
        if len(normalised) != len(text):  # a ligature or the like expanded: offsets would drift
            normalised = text
        for match in _CANDIDATE.finditer(normalised):
            typed = match.group(0)
            if not any(char.isdigit() for char in typed):
                continue  # "lol", "Ool": words, not codes
            code = self.resolve(typed)
            if code is not None:
                found.append(LooseCode(match.start(), match.end(), code))
        return found


def _folded(code: str) -> str:
    # Twice: a typed `O4101` folds to the digits `04101`, which then lose their padding as `04101` does.
    return loose_key(loose_key(code))
