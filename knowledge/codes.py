"""Fault codes: the shapes manuals print them in and their normal form (the spaCy linker is code_linker).

A code is printed many ways (`E102`, `e-102`, `ALARM 1`, `ALARM:1`, `Err-07`,
`报警号 6065`); every form maps to one key (`E102`, `ALARM1`, `ERR07`, `6065`)
and one canonical id (`fault:E102`). Placeholder codes such as `XX204` (the HMI
shows the spindle or printer number in place of `XX`) also get a GLOB pattern
so `01204` finds them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Strong shapes: recognisable as a code without a cue word.
_STRONG = (
    r"[A-Za-z]{1,6}[-:]\d{1,5}"  # Err-07, ALARM:1, error:22, E-102
    r"|[A-Z]{1,4}\d{2,5}(?![.,]?\d)"  # E102, F03, XX204 (not V1.2 style numbers)
    r"|0[xX][0-9A-Fa-f]{2,8}"  # 0x0400: a fault word's value as a bus reports it
    r"|(?:[Bb]it|BIT)\s?\d{1,2}(?!\d)"  # bit 11 of a status word
    r"|(?:[A-Z][A-Za-z]*\.)*[A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+"  # DRV_FAULT, DOOR_OPEN, ODrive.Error.DC_BUS_UNDER_VOLTAGE
)
_NUMERIC = r"\d{1,5}"  # 6065, 04101, 1: only after a cue word, in a heading or in a code column
_SHORT = r"[A-Za-z]{1,4}\d{1,5}"  # E7, A1: too ambiguous alone, a code after a cue word or in a code column
CUE_EN = r"(?:fault|error|alarm|alm|err)(?:\s*(?:code|no\.?|number|#))?"
CUE_ZH = r"(?:故障代码|故障码|故障号|报警号|报警代码|报警码|错误代码|错误码|报警|代码)"
_CUE = rf"(?:{CUE_EN}|{CUE_ZH})"
_SEP = r"\s*[:：#]?\s*"

_HEADING_CUED = re.compile(
    rf"^\s*(?:(?P<self>{_CUE}[-:]\d{{1,5}})|{_CUE}{_SEP}(?P<code>{_STRONG}|{_SHORT}|{_NUMERIC}))(?!\w)\s*(?:[—–\-:：|]\s*)?(?P<title>.*)$",
    re.I | re.S,
)
_HEADING_BARE = re.compile(rf"^\s*(?P<code>{_STRONG}|\d{{3,5}})(?!\w)\s*(?:[—–\-:：|]\s*)?(?P<title>.*)$", re.S)
MENTION = re.compile(
    # ASCII boundaries, not \w: Chinese runs straight into codes ("出现E102故障", "加工中心报警号 9999"),
    # and a colon after a code ends the code ("shows E103: what now") unless a number follows ("ALARM:1").
    rf"(?<![A-Za-z0-9_-])(?:(?P<bare>{_STRONG})|{_CUE}{_SEP}(?P<cued>{_STRONG}|{_NUMERIC}))(?![A-Za-z0-9_]|:\d)",
    re.I,
)
# In a code column a display's letters with a dot or dash are a code too: O-I, P-LOSS, OL-br, SC-trP.
_DISPLAY = r"[A-Za-z]{1,4}\.?\s?[.\-][A-Za-z0-9]{1,6}(?:-[A-Za-z0-9]{1,4})?|[A-Za-z]\.\s?[A-Za-z0-9\-]{2,8}"
# A display code as typed in a question (`U.Volt`, `P-LOSS`, `OL-br`): looked up, never guessed.
DISPLAY_TOKEN = re.compile(rf"(?<![A-Za-z0-9.\-])(?:{_DISPLAY})(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")
_CELL = re.compile(
    rf"^\s*(?:(?P<strong>{_STRONG}|{_SHORT}|{_DISPLAY})|(?:{_CUE}{_SEP})?(?P<code>{_NUMERIC}))\s*$", re.I
)
_PLACEHOLDER = re.compile(r"^(X{2,})(\d+)$")
_SEPARATORS = re.compile(r"[\s\-_:：#.]+")
# The same cue inside a key, where separators are gone: `ALARM1`, `ERR07`, `报警号6065` (not `ERROR`, `ALMOST`).
_KEY_CUE = re.compile(rf"^{_CUE}(?=\d)", re.I)
# A cue word people and messages put before a code (`fault 123`, `Alarm: 6065`, `报警号6065`, `ALARM1`);
# fused with `-` or `:` and a number it is part of the printed code (`ALARM:1`, `Err-07`), as in headings.
_LEADING_CUE = re.compile(rf"^\s*{_CUE}(?![-:]\d)(?:\s*[:：#]\s*|\s+|(?=\d))(?=[A-Za-z0-9])", re.I)

LABEL = "FAULT_CODE"


def code_key(raw: str) -> str:
    """The normal form used for exact lookups: `e-102` → `E102`, `ALARM 1` → `ALARM1`."""
    return _SEPARATORS.sub("", unicodedata.normalize("NFKC", raw)).upper()


def scope_key(name: str) -> str:
    """`HP-200`, `hp 200` and `HP200` name the same model."""
    return code_key(name)


def canonical_id(raw: str) -> str:
    return f"fault:{code_key(raw)}"


def reported_code(raw: str) -> str:
    """A fault code as an HMI shows it, from however it was reported: the one spelling of every path
    (alarm, question, work order). `fault 123`, `alarm 123` and `123` → `123`; `e 102` → `E102`;
    `ALARM:1` stays as printed."""
    bare = _LEADING_CUE.sub("", unicodedata.normalize("NFKC", raw))
    return re.sub(r"\s+", "", bare).upper()


def fault_key(raw: str) -> str:
    """A fault's identity: its key without a cue word, so `ALARM:1`, `alarm 1` and `1`, or `fault 123`
    and `ALARM123`, are one fault on one machine (one work order)."""
    return _KEY_CUE.sub("", code_key(raw))


def lookup_keys(raw: str) -> list[str]:
    """Keys to try for a code as typed: as is, then without a cue word (`Alarm 6065` → `6065`)."""
    return [k for k in dict.fromkeys((code_key(raw), fault_key(raw))) if k]


def glob_pattern(code: str) -> str | None:
    """`XX204` → `[0-9][0-9]204`, so the number shown on the HMI finds the placeholder entry."""
    match = _PLACEHOLDER.match(code_key(code))
    if not match:
        return None
    return "[0-9]" * len(match.group(1)) + match.group(2)


@dataclass(frozen=True)
class Heading:
    code: str
    title: str


def parse_heading(text: str, emphasized: bool) -> Heading | None:
    """A record heading: a code at the start of a short block, after a cue word or in a heading font."""
    text = unicodedata.normalize("NFKC", text).strip()
    if not text or len(text) > 160 or text.count("\n") > 2:
        return None
    match = _HEADING_CUED.match(text)
    if match is None and emphasized:
        match = _HEADING_BARE.match(text)
    if match is None:
        return None
    return Heading(
        code=_tidy_code(match.groupdict().get("self") or match.group("code")),
        title=" ".join(match.group("title").split()),
    )


def parse_code_cell(text: str) -> str | None:
    """The content of a table's code column, if it is a code."""
    match = _CELL.match(unicodedata.normalize("NFKC", text))
    return _tidy_code(match.group("strong") or match.group("code")) if match else None


def named_alarm(text: str) -> str | None:
    """A code column that holds names (`Over Voltage`, `Lost Phase`): drives that signal alarms
    by an LED and software name them instead of numbering them."""
    text = " ".join(unicodedata.normalize("NFKC", text).split())
    if 3 <= len(text) <= 32 and len(text.split()) <= 4 and re.fullmatch(r"[A-Za-z][A-Za-z \-/]*", text):
        return text
    return None


def is_named(code: str) -> bool:
    return " " in code.strip()


_DISPLAY_LOOKALIKES = str.maketrans({"O": "0", "I": "1", "L": "1", "V": "U", "S": "5", "Z": "2", "B": "8", "Q": "0"})


def loose_key(raw: str) -> str:
    """The key a code matches by when its exact key does not: zero padding dropped (`0023`
    on paper is `23` on the display, `0x0400` is `0x400`), and letters a 7-segment display
    cannot tell from digits folded together (`O.Volt` is printed `O.Uo1t`)."""
    key = code_key(raw)
    hexadecimal = re.fullmatch(r"0X0*([0-9A-F]+)", key)
    if hexadecimal:
        return "0X" + hexadecimal.group(1)
    if key.isdigit():
        return key.lstrip("0") or "0"
    return key.translate(_DISPLAY_LOOKALIKES)


def _tidy_code(code: str) -> str:
    return re.sub(r"\s+", "", code)
