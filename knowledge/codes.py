"""Fault codes: the shapes manuals print them in and their normal form (the spaCy linker is code_linker).

A code is printed many ways (`E102`, `e-102`, `ALARM 1`, `ALARM:1`, `Err-07`,
`报警号 6065`); every form maps to one key (`E102`, `ALARM1`, `ERR07`, `6065`)
and one canonical id (`fault:E102`). Placeholder codes such as `XX204` (the HMI
shows the spindle or printer number in place of `XX`) also get a GLOB pattern
so `01204` finds them.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from knowledge.text import latin_lookalikes, stop_words

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
# `code` alone too (`AZL52 shows code 99`), as 代码 alone is in Chinese.
CUE_EN = r"(?:(?:fault|error|alarm|alm|err|warn(?:ing)?)(?:\s*(?:code|no\.?|number|#))?|code)"
CUE_ZH = r"(?:故障代码|故障码|故障号|报警号|报警代码|报警码|错误代码|错误码|警报号|报警|警报|故障|错误|代码)"
# German manuals and technicians say Störung (fault) and Fehler (error), with or without -code, -nummer, -meldung.
CUE_DE = r"(?:st(?:ö|oe)r(?:ung)?s?|fehler|warnung)(?:code|nummer|meldung)?"
_CUE = rf"(?:{CUE_EN}|{CUE_ZH}|{CUE_DE})"
# What technicians type before a code that says which box shows it (`drv OC1`, `inverter trip oH1`):
# not a cue for a bare number (`drive 2` is the second drive), nor ever part of a code's key (`INV1`).
_SHOWN_BY = r"(?:drv|drive|inv|inverter|vfd|servo|trip|trips|tripped|shows|showing|displays)(?:\s+(?:trip|trips|shows|showing|displays))?"
# What a display is said to show: a zero-padded number after it is a code (`display says 03`); a reading is not
# padded (`shows 10 bar`).
_SHOWS = r"(?:shows|showing|displays|says)"
_SEP = r"\s*[:：#]?\s*"

_HEADING_CUED = re.compile(
    rf"^\s*(?:(?P<self>{_CUE}[-:]\d{{1,5}})|{_CUE}{_SEP}(?P<code>{_STRONG}|{_SHORT}|{_NUMERIC}))(?!\w)\s*(?:[—–\-:：|]\s*)?(?P<title>.*)$",
    re.I | re.S,
)
# A display's mnemonics, codes in a code column or a heading, never in prose: letters in display case
# (`ocA`, `oC`: lower-case, then a capital, as no word is spelt), a few letters with a lower-case one
# and a digit (`oH1`, `Er6`; not the connector `CN1`) and letters each with its dot (`b.b.`). An
# all-capital word (`OC`, `ON`) is a code only in a column headed as alarms (`named_alarm`).
_DISPLAY_CASE = r"(?-i:[a-z]{1,3}[A-Z][A-Za-z]{0,3})"
_LOWER_SHORT = r"(?-i:(?=[A-Za-z]{1,4}\d)[A-Z]*[a-z][A-Za-z]*\d{1,3})"
_DOTTED = r"(?:[A-Za-z]\.){2,4}"  # in a code column only: a heading may open with `A.C.`
# A document's own numbering heads its parts and steps (`Part8. FAQ`, `Step2 Wiring`), not faults.
_NUMBERING = r"(?i:part|chapter|section|step|page|fig|figure|table|appendix|note|item)\s?\d"
_HEADING_BARE = re.compile(
    rf"^\s*(?!{_NUMBERING})(?P<code>{_STRONG}|{_LOWER_SHORT}|{_DISPLAY_CASE}|\d{{3,5}})(?!\w)\s*(?:[—–\-:：|]\s*)?(?P<title>.*)$",
    re.S,
)
MENTION = re.compile(
    # ASCII boundaries, not \w: Chinese runs straight into codes ("出现E102故障", "加工中心报警号 9999"),
    # and a colon after a code ends the code ("shows E103: what now") unless a number follows ("ALARM:1").
    rf"(?<![A-Za-z0-9_-])(?:(?P<bare>{_STRONG})|(?:{_CUE}{_SEP}|{_SHOWN_BY}\s+(?=[A-Za-z])|{_SHOWS}\s+(?=0\d))(?P<cued>{_STRONG}|{_SHORT}|{_NUMERIC}))"
    r"(?![A-Za-z0-9_]|:\d)",
    re.I,
)


# The cue words a page prints before a code (`WARNING CODE 44`, `Alarm 9`, `报警 23`, `Störung b3`).
_CODE_CUES = (
    "code",
    "alarm",
    "alm",
    "error",
    "err",
    "fault",
    "warning",
    "störung",
    "fehler",
    "warnung",
    "报警",
    "故障",
)


def after_cues(code: str) -> list[str]:
    """A code as a page prints it where it is a fault's, after a cue word: phrases for the word index (`44` or
    `E1` alone is on many pages, as a page number, a setting or a terminal)."""
    return [f"{cue} {code}" for cue in _CODE_CUES]


def mentioned_code(match: re.Match[str]) -> str:
    """A MENTION's code without its cue (`E60` of `error E60`)."""
    return match.group("bare") or match.group("cued")


# Typed rather than printed, looked up and never guessed: a code read aloud from a 7-segment display
# a character at a time (`E r r 0 4`), its letters apart from its number (`E 102`), or letters and
# digits mixed as no printed shape has them (`0H1`, `E1O2`). Each has letters and digits: `1 2 3` is
# a list, `a b c` prose.
TYPED_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:(?=(?:\w )*[A-Za-z])(?=(?:\w )*\d)(?:[A-Za-z0-9] ){2,7}[A-Za-z0-9]|[A-Za-z]{1,3} \d{2,5}"
    r"|(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{2,8})(?![A-Za-z0-9])"
)
# In a code column a display's letters with a dot or dash are a code too: O-I, P-LOSS, OL-br, SC-trP.
_DISPLAY = r"[A-Za-z]{1,4}\.?\s?[.\-][A-Za-z0-9]{1,6}(?:-[A-Za-z0-9]{1,4})?|[A-Za-z]\.\s?[A-Za-z0-9\-]{2,8}"
# A display code as typed in a question (`U.Volt`, `P-LOSS`, `OL-br`): looked up, never guessed.
DISPLAY_TOKEN = re.compile(rf"(?<![A-Za-z0-9.\-])(?:{_DISPLAY})(?![A-Za-z0-9\-]|\.[A-Za-z0-9])")
# In a code column a code may print its letter apart from its number, as heat pump controllers list them
# (`E 9001`, `W 8005`): one or two capitals, then the digits. Tried after a cue word and its number (`ALM 12` is 12).
_SPACED = r"(?-i:[A-Z]{1,2})\s\d{2,5}"
_CELL = re.compile(
    rf"^\s*(?:(?P<strong>{_STRONG}|{_SHORT}|{_DISPLAY}|{_DISPLAY_CASE}|{_DOTTED})|(?:{_CUE}{_SEP})?(?P<code>{_NUMERIC})"
    rf"|(?P<spaced>{_SPACED}))\s*$",
    re.I,
)
_PLACEHOLDER = re.compile(r"^(X{2,})(\d+)$")
_SEPARATORS = re.compile(r"[\s\-_:：#.]+")
# The same cue inside a key, where separators are gone: `ALARM1`, `ERR07`, `报警号6065` (not `ERROR`, `ALMOST`).
_KEY_CUE = re.compile(rf"^{_CUE}(?=\d)", re.I)
_LEADING_SHOWN_BY = re.compile(rf"^\s*(?:(?:{_SHOWN_BY}\s+)+(?=[A-Za-z])|{_SHOWS}\s+(?=0\d))", re.I)
# A cue word people and messages put before a code (`fault 123`, `Alarm: 6065`, `报警号6065`, `ALARM1`);
# fused with `-` or `:` and a number it is part of the printed code (`ALARM:1`, `Err-07`), as in headings.
_LEADING_CUE = re.compile(rf"^\s*{_CUE}(?![-:]\d)(?:\s*[:：#]\s*|\s+|(?=\d)|(?<=[\u4e00-\u9fff]))(?=[A-Za-z0-9])", re.I)

# The words a question puts around a code to ask about it (`drive shows F0003, what does it mean?`):
# with the code taken out, a question of these words alone asks about nothing else.
_ASKING = re.compile(
    rf"(?<![A-Za-z]){_CUE}|{CUE_ZH}|(?<![A-Za-z])(?:{_SHOWN_BY}|codes?|display(?:ed)?|screen|hmi|panel|says|shown|"
    r"appears?|came|comes|coming|keeps|again|up|on|means?|meaning|fix|reset|clear|remedy|help)(?![A-Za-z])"
    r"|怎么办|怎么处理|怎么解决|如何处理|如何解决|什么意思|是什么|意思|显示|出现|提示",
    re.I,
)

LABEL = "FAULT_CODE"


def asked_besides(text: str) -> str:
    """What a question asks besides its printed codes: without them and the words around them."""
    return _ASKING.sub(" ", MENTION.sub(" ", unicodedata.normalize("NFKC", text)))


def code_key(raw: str) -> str:
    """The normal form used for exact lookups: `e-102` → `E102`, `ALARM 1` → `ALARM1`."""
    return _SEPARATORS.sub("", latin_lookalikes(unicodedata.normalize("NFKC", raw))).upper()


# Manuals here are written in these Latin-script languages (and Chinese, whose words are no codes' letters).
_WORD_LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pt")
_AFTER_CUE = re.compile(rf"(?<![A-Za-z]){_CUE}{_SEP}$", re.I)


def common_word(typed: str, printed: frozenset[str], before: str) -> bool:
    """A known code that is also a common word (`BE` and `AB` of a burner control's error list, `Stop`) is
    that word unless typed as a manual prints it (`printed`) or after a cue word (`before` it: `error be`):
    `should the membranes be replaced` and the German `sackt kurz ab` name no code."""
    return typed not in printed and typed.lower() in _common_words() and not _AFTER_CUE.search(before)


@cache
def _common_words() -> frozenset[str]:
    return frozenset(word.lower() for lang in _WORD_LANGUAGES for word in stop_words(lang))


def typed_forms(known_codes: Iterable[str]) -> set[str]:
    """Known codes as printed and as typed without their separators (`b.b.` is typed `bb`)."""
    return {form for code in known_codes for form in (code, code_key(code)) if form}


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
    """Keys to try for a code as typed: as is, then without a cue word (`Alarm 6065` → `6065`,
    `drv OC1` → `OC1`)."""
    keys = (key for form in _asked_forms(raw) for key in (code_key(form), fault_key(form)))
    return [k for k in dict.fromkeys(keys) if k]


def _asked_forms(raw: str) -> list[str]:
    """A code as typed, without the words naming what showed it (`drive shows F0003`), and without
    its cue word (`fault E102`, `报警E102`)."""
    shown = _LEADING_SHOWN_BY.sub("", raw)
    return list(dict.fromkeys((raw, shown, _LEADING_CUE.sub("", shown))))


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


# Marks a table cell prints around a code: brackets, a footnote's star or dagger, a colon or slash after it, a
# note's number in parentheses (`[E07]`, `*E07*`, `E07:`, `AL-07/`, `E07(1)`). The display shows the code alone.
_CELL_MARKS = re.compile(r"^[\s\[({<*†‡\"'“”]*(?P<code>.*?)(?:\s*\(\d{1,2}\)|[\s\])}>*†‡:：;,/|\"'“”])*$", re.S)


def parse_code_cell(text: str) -> str | None:
    """The content of a table's code column, if it is a code, without the marks printed around it. A number
    with marks (`[3]`, `1:`) is a footnote's reference or a list's item as often as a code: not read."""
    text = latin_lookalikes(unicodedata.normalize("NFKC", text))
    match = _CELL.match(text)
    if match is None and (bare := _CELL_MARKS.match(text)) and re.search(r"[A-Za-z]", bare.group("code")):
        match = _CELL.match(bare.group("code"))
    return _tidy_code(match.group("strong") or match.group("code") or match.group("spaced")) if match else None


_HEX = re.compile(r"(?=[0-9A-Fa-f]*\d)(?=[0-9A-Fa-f]*[A-Fa-f])[0-9A-Fa-f]{2,4}")


def hex_code(text: str) -> str | None:
    """`3A`, `1F`: a hex code as a burner control's error list prints it. Only a column named a code is
    read this way; elsewhere `2A` is as likely a current."""
    text = unicodedata.normalize("NFKC", text).strip()
    return text.upper() if _HEX.fullmatch(text) else None


def negative_code(text: str) -> str | None:
    """`-4`, `-10000`: an error a command returns, as a robot controller's or an interface's error list prints it.
    Only a column named a code is read this way; elsewhere `-4` is as likely a tolerance or a temperature."""
    text = unicodedata.normalize("NFKC", text).strip().replace("−", "-")
    return text if re.fullmatch(r"-[1-9]\d{0,5}", text) else None


def named_alarm(text: str) -> str | None:
    """A code column that holds names (`Over Voltage`, `Lost Phase`): drives that signal alarms
    by an LED and software name them instead of numbering them."""
    text = " ".join(unicodedata.normalize("NFKC", text).split())
    if 2 <= len(text) <= 32 and len(text.split()) <= 4 and re.fullmatch(r"[A-Za-z][A-Za-z \-/]*", text):
        return text
    return None


def is_named(code: str) -> bool:
    return " " in code.strip()


# Characters a 7-segment display shows alike, folded to the digit: o/0, I/l/1, Z/2, S/5, b/6, B/8,
# g/9 (`b` and `g` by case: a display's `b` is a 6 without its top bar, its `B` an 8), and V/U
# (a display has no V: `O.Volt` is printed `O.Uo1t`).
_CASED_LOOKALIKES = str.maketrans({"b": "6", "g": "9"})
_DISPLAY_LOOKALIKES = str.maketrans({"O": "0", "Q": "0", "I": "1", "L": "1", "Z": "2", "S": "5", "B": "8", "V": "U"})


def loose_key(raw: str) -> str:
    """The key a code matches by when its exact key does not: zero padding dropped (`E002`,
    `E02` and `E2`; `0023` on paper is `23` on the display; `0x0400` is `0x400` and `0400h`), and letters a
    7-segment display cannot tell from digits folded together (`0H1` for `oH1`, `E1O2` for `E102`)."""
    key = code_key(raw)
    # A bus value in either notation: `0x0004`, and as PLC programmers and Chinese manuals write it, `0004h`
    # (a leading digit, as assemblers want it: `E1H` is a display code, `0E1h` a value).
    hexadecimal = re.fullmatch(r"0X([0-9A-F]+)|(\d[0-9A-F]*)H", key)
    if hexadecimal:
        return "0X" + ((hexadecimal.group(1) or hexadecimal.group(2)).lstrip("0") or "0")
    printed = _SEPARATORS.sub("", unicodedata.normalize("NFKC", raw)).translate(_CASED_LOOKALIKES).upper()
    folded = printed.translate(_DISPLAY_LOOKALIKES)
    kept: list[str] = []
    for at, char in enumerate(folded):
        if char == "0" and not (kept and kept[-1].isdigit()) and _pads(printed, at, folded):
            continue
        kept.append(char)
    return "".join(kept)


def _pads(printed: str, at: int, folded: str) -> bool:
    """Whether the zero at `at` pads the number after it: a printed zero before a digit (`E02`,
    `0023`), or a letter O typed for one before the digits that end the code (`CPFO2`); not an O
    before letters (`OL1` is no `11`) or in a word (`O.Uo1t`)."""
    if printed[at] == "0":
        return folded[at + 1 : at + 2].isdigit()
    return printed[at + 1 :].isdigit()


def lookalike_keys(raw: str) -> list[str]:
    """Second-tier keys for a code as typed, matched against each code's `loose_key` only when no
    `lookup_keys` key is a code: as typed, then without a cue word (`err 01` → `1`)."""
    forms = _asked_forms(raw)
    keyed = [(loose_key(form), form) for form in forms + [_LEADING_CUE.sub("", form) for form in forms]]
    return list(dict.fromkeys(key for key, form in keyed if key and (not key.isdigit() or _numeric(form))))


def _numeric(typed: str) -> bool:
    """A code typed as a number with a letter for a digit (`O4101`), not a name that folds to one
    (the phase `L1` is no alarm 11)."""
    return typed.isdigit() or (sum(c.isalpha() for c in typed) <= 1 and sum(c.isdigit() for c in typed) >= 2)


def _tidy_code(code: str) -> str:
    return re.sub(r"\s+", "", code)


# The index terms of codes (`code_terms`): a token as a display prints it.
_CODE_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[.\-][A-Za-z0-9]+)*")
# Printed codes mix letters with digits or separators (O-I, SC-trP, Er4, 0x3022); a page's plain
# words and numbers are left to the word index.
_CODE_LIKE = re.compile(r"(?=.*[A-Za-z])(?=.*[\d.\-])|^0\d+$|^[A-Z]{2,6}$")
CODE_TERM = "code"


def code_terms(text: str, every_token: bool = False) -> list[str]:
    """Index terms for codes as displays show them (`code` + the loose key): `O.Volt` typed
    finds `O.Uo1t` printed, `23` finds `0023`. A query gives every token and every pair of
    neighbouring tokens (`sc trp` is `SC-trP`); a page only its code-like tokens."""
    tokens = _CODE_TOKEN.findall(latin_lookalikes(text))
    if every_token:
        candidates = tokens + [a + b for a, b in itertools.pairwise(tokens)]
    else:
        candidates = [t for t in tokens if _CODE_LIKE.search(t)]
    keys = (loose_key(t) for t in candidates if 1 <= len(t) <= 12)
    return list(dict.fromkeys(f"{CODE_TERM}{key.lower()}" for key in keys if key))
