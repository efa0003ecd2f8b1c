"""Text people type (a question, a step ticked, a fix) and the names they give, as every way in accepts them:
the service's bodies, the MES's webhooks, the CLI's options and the work-order store.

Free text is kept with its control characters stripped (`stored_text`): an escape sequence in a remedy
would otherwise reach every terminal that prints it, and a carriage return hides what precedes it. A name is
an identity (who isolated the machine, who ticked a step), so it is refused rather than repaired when it
could mislead (`person_name`): one with no visible character, or with a control or bidirectional control
character that makes it display as something else. Both refuse blank text with a message saying so; as a
body's validator (`AfterValidator(stored_text)`, `PersonName`) the refusal is a 422 naming the field.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

__all__ = [
    "BIDI_CONTROLS",
    "BlankText",
    "PersonName",
    "person_name",
    "printable",
    "stored_text",
    "visible",
]

# Embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069): they reorder the text that follows.
BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})
# Letters and symbols that draw nothing: the Hangul fillers and the blank Braille pattern.
BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# Categories that draw nothing on their own: controls, format characters (zero-width space, joiners, soft
# hyphen), separators, combining marks, and code points with no character.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Me"})
# Line breaks and tabs belong in a note; every other control character (C0, DEL, C1) goes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAK = re.compile(r"\r\n?")
# Format characters other than the joiners (which some scripts spell names with) change nothing a reader sees.
_KEPT_FORMAT = frozenset("\u200c\u200d")


class BlankText(ValueError):
    """Text with nothing a reader would see in it."""


def _code_points(chars: Iterable[str]) -> str:
    return ", ".join(f"U+{ord(char):04X}" for char in dict.fromkeys(chars))


def visible(text: str) -> bool:
    """Whether `text` draws at least one character."""
    return any(unicodedata.category(c) not in INVISIBLE_CATEGORIES and c not in BLANK_GLYPHS for c in text)


def printable(text: str) -> str:
    """`text` as it is kept: control characters but line breaks and tabs removed, Windows and old Mac line
    breaks made `\\n`, surrounding whitespace trimmed."""
    return _CONTROL.sub("", _LINE_BREAK.sub("\n", text)).strip()


def stored_text(text: str) -> str:
    """`printable(text)`, refused (`BlankText`) when nothing visible is left: text that must say something."""
    kept = printable(text)
    if not visible(kept):
        raise BlankText("is blank: it has no visible character")
    return kept


def person_name(text: str) -> str:
    """A name or badge number as an identity: NFC, runs of whitespace made one space, invisible format
    characters dropped. Refused (ValueError) when it holds a control or bidirectional control character, or
    nothing visible."""
    controls = [c for c in text if unicodedata.category(c) == "Cc"]
    if controls:
        raise ValueError(f"a name must not contain control characters ({_code_points(controls)})")
    bidi = [c for c in text if unicodedata.bidirectional(c) in BIDI_CONTROLS]
    if bidi:
        raise ValueError(
            f"a name must not contain bidirectional control characters ({_code_points(bidi)}): they change "
            "the order it is displayed in"
        )
    name = "".join(
        c for c in unicodedata.normalize("NFC", text) if unicodedata.category(c) != "Cf" or c in _KEPT_FORMAT
    )
    name = " ".join(name.split())
    if not visible(name):
        shown = f" ({_code_points(text)})" if text.strip() else ""
        raise BlankText(f"a name needs a visible character; this one has none{shown}")
    return name


# The length limit holds for what was sent, before anything is stripped from it.
PersonName = Annotated[str, StringConstraints(max_length=80), AfterValidator(person_name)]
