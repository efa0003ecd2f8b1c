"""Finding devices, sensors and fault codes in a question (English and Chinese).

Every match becomes an entity labelled DEVICE, SENSOR or FAULT_CODE whose
`kb_id_` is the canonical id (`press-3`, `coolant_level`, `fault:E102`).
Entities are resolved as they were on a spaCy blank Chinese pipeline (one
token per character): a match that does not start and end on a token is left
out, and of overlapping matches the longest (then the first) is kept. The synonym
lexicon comes from the plant config, so a plant adds words without touching
code.

Fault codes come from the spaCy code linker (`knowledge.code_linker`), but
importing spaCy costs seconds on a cold CLI. Text without Chinese in which
every code shape stands between spaces or the punctuation spaCy always splits
off, and no code the index knows occurs elsewhere, gives the linker's
mentions from its own pattern alone (`_plain_code_mentions`); any other text
goes through the linker.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, NamedTuple

from knowledge.codes import MENTION, canonical_id, code_key
from edge.answer import language_of
from tools.plant import DeviceConfig

if TYPE_CHECKING:
    from knowledge.code_linker import CodeLinker

_CJK = re.compile(r"[\u3400-\u9fff]")
# Around a code: prefixes and suffixes that spaCy's English tokenizer splits off in any
# context, so the code's own characters are the span the linker would find.
_OPENERS = frozenset("([{\"'")
_CLOSERS = frozenset(")]}\",;:!?")


@dataclass(frozen=True)
class Mention:
    label: str  # DEVICE | SENSOR | FAULT_CODE
    canonical: str
    text: str
    start: int
    end: int
    device_id: str | None = None


class Entity(NamedTuple):
    """One resolved entity, with the attribute names of a spaCy `Span`."""

    label_: str
    kb_id_: str
    start_char: int
    end_char: int
    text: str


class _Entities(NamedTuple):
    ents: tuple[Entity, ...]


@dataclass(frozen=True)
class Mentions:
    devices: list[str] = field(default_factory=list)
    # (device_id, sensor_id) pairs; device_id is the device the synonym belongs to.
    sensors: list[tuple[str, str]] = field(default_factory=list)
    fault_codes: list[str] = field(default_factory=list)
    # Non-overlapping, in text order.
    entities: tuple[Entity, ...] = ()

    @property
    def doc(self) -> _Entities:
        """`doc.ents`, as readers of the former spaCy `Doc` expect it."""
        return _Entities(self.entities)


class _CodeMention(NamedTuple):
    start: int
    end: int
    code: str
    canonical_id: str


class Lexicon:
    def __init__(self, devices: dict[str, DeviceConfig], known_codes: Iterable[str] = ()):
        self._known = frozenset(known_codes)
        # Whitespace-free and lower-case: spaCy's PhraseMatcher compares lower-cased tokens.
        self._known_squeezed = tuple(sorted({_squeeze(code)[0] for code in self._known} - {""}))
        self._linker: CodeLinker | None = None
        self._linker_lock = threading.Lock()
        self._devices = devices
        terms: dict[str, list[tuple[str, str, str | None]]] = {}
        for device in devices.values():
            for word in {device.id, device.name, device.name_zh, *device.synonyms} - {""}:
                terms.setdefault(word.lower(), []).append(("DEVICE", device.id, None))
            for sensor in device.sensors.values():
                for word in {sensor.id, sensor.id.replace("_", " "), sensor.label, sensor.label_zh, *sensor.synonyms} - {""}:
                    terms.setdefault(word.lower(), []).append(("SENSOR", sensor.id, device.id))
        self._terms = terms
        # Longest first, so "coolant level" wins over "coolant" and "3号液压机" over "液压机".
        alternatives = sorted(terms, key=len, reverse=True)
        self._pattern = re.compile("|".join(_term_regex(term) for term in alternatives)) if alternatives else None

    def warm(self) -> None:
        """Load the spaCy code linker now, for the text that the plain reading does not cover."""
        self._code_linker()

    def find(self, text: str) -> Mentions:
        terms = _without_overlaps(self._term_mentions(text))
        # A device id such as "Press-3" also has the shape of a code; the plant's own words win.
        codes = [Mention("FAULT_CODE", code.canonical_id, _as_printed(code.code, code.canonical_id), code.start, code.end)
                 for code in self._code_mentions(text)
                 if all(code.end <= t.start or code.start >= t.end for t in terms)]
        mentions = sorted(terms + codes, key=lambda m: m.start)
        return _collect(mentions, _entities(text, mentions))

    def _code_mentions(self, text: str) -> list[_CodeMention]:
        language = language_of(text)
        if language == "en":
            plain = _plain_code_mentions(text, self._known_squeezed)
            if plain is not None:
                return plain
        return [_CodeMention(m.start, m.end, m.code, m.canonical_id)
                for m in self._code_linker().mentions(text, language)]

    def _code_linker(self) -> CodeLinker:
        with self._linker_lock:
            if self._linker is None:
                from knowledge.code_linker import CodeLinker  # imports spaCy: only for text that needs it

                self._linker = CodeLinker(self._known)
            return self._linker

    def _term_mentions(self, text: str) -> list[Mention]:
        if self._pattern is None:
            return []
        found = []
        for match in self._pattern.finditer(text.lower()):
            for label, canonical, device_id in self._terms[match.group(0)]:
                found.append(Mention(label, canonical, text[match.start():match.end()], match.start(), match.end(), device_id))
        return found


def _plain_code_mentions(text: str, known_squeezed: tuple[str, ...]) -> list[_CodeMention] | None:
    """The English code linker's mentions, when its tokens cannot change them; else None.

    The linker marks each match of `MENTION` (expanded to whole tokens) and each
    standalone occurrence of a known code (token for token), keeping the longest
    where they overlap. A span that starts and ends on a space, an end of the
    text, or punctuation the tokenizer always splits off is whole tokens as it
    is. So when every match is such a span, and every occurrence of a known code
    (compared without whitespace: a superset of the token matches) lies inside a
    match, touches a letter or digit (not standalone), or is itself such a span
    without whitespace and apart from the others, these spans are the mentions.
    """
    if not unicodedata.is_normalized("NFKC", text):  # the linker reads the NFKC form
        return None
    found: list[_CodeMention] = []
    for match in MENTION.finditer(text):
        start, end = match.span()
        if not _whole_tokens(text, start, end):
            return None
        group = "bare" if match.group("bare") else "cued"
        found.append(_CodeMention(start, end, match.group(0), canonical_id(match.group(group))))
    known: list[_CodeMention] = []
    if known_squeezed:
        squeezed, origin = _squeeze(text)
        for code in known_squeezed:
            at = squeezed.find(code)
            while at != -1:
                start, end = origin[at], origin[at + len(code) - 1] + 1
                at = squeezed.find(code, at + 1)
                if any(m.start <= start and end <= m.end for m in found) or _touches_word(text, start, end):
                    continue
                if any(char.isspace() for char in text[start:end]) or not _whole_tokens(text, start, end):
                    return None
                if any(start < m.end and m.start < end for m in found + known):
                    return None
                known.append(_CodeMention(start, end, text[start:end], canonical_id(text[start:end])))
    return sorted(found + known, key=lambda m: m.start)


def _whole_tokens(text: str, start: int, end: int) -> bool:
    while start > 0 and text[start - 1] in _OPENERS:
        start -= 1
    while end < len(text) and (text[end] in _CLOSERS or text[end] == "." and _period_splits_after(text[end - 1])):
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


def _entities(text: str, mentions: list[Mention]) -> tuple[Entity, ...]:
    """The mentions as entities of spaCy's blank Chinese pipeline: `Doc.char_span` (strict) on
    its tokens, then `spacy.util.filter_spans`."""
    starts, ends = _char_tokens(text)
    spans = [(starts[m.start], ends[m.end], m) for m in mentions if m.start in starts and m.end in ends]
    kept: list[tuple[int, int, Mention]] = []
    seen: set[int] = set()
    for first, stop, mention in sorted(spans, key=lambda s: (s[1] - s[0], -s[0]), reverse=True):
        if first not in seen and stop - 1 not in seen:
            kept.append((first, stop, mention))
            seen.update(range(first, stop))
    return tuple(Entity(m.label, m.canonical, m.start, m.end, text[m.start:m.end])
                 for _, _, m in sorted(kept, key=lambda s: s[0]))


def _char_tokens(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """Token index by start and by end offset, as `spacy.blank("zh")` splits text: one token
    per non-space character; one plain space after a token belongs to it, other whitespace
    runs are tokens of their own."""
    bounds: list[tuple[int, int]] = []
    position = 0
    for offset, char in enumerate(text):
        if char.isspace():
            continue
        if offset > position:
            bounds.append((position, offset))
        bounds.append((offset, offset + 1))
        position = offset + 1
        if position < len(text) and text[position] == " ":
            position += 1
    if position < len(text):
        bounds.append((position, len(text)))
    return ({start: n for n, (start, _) in enumerate(bounds)}, {end: n + 1 for n, (_, end) in enumerate(bounds)})


def _as_printed(mention: str, canonical_id: str) -> str:
    """The code as the HMI prints it: "fault E102" -> "E102", "DRV_FAULT" stays. A bare number keeps
    its cue word ("ALARM 1", "报警号 6065"): the manual tool tries it with and without."""
    key = canonical_id.removeprefix("fault:")
    if key.isdigit():
        return mention
    for start in range(len(mention)):
        if code_key(mention[start:]) == key:
            return mention[start:].strip()
    return mention


def _term_regex(term: str) -> str:
    escaped = re.escape(term)
    if _CJK.search(term):
        return escaped
    # Latin words need boundaries: "press" must not fire inside "pressure".
    return rf"(?<![\w-]){escaped}(?![\w-])"


def _without_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the longest term where two overlap ("coolant level" over "coolant"); a synonym shared by
    several sensors keeps all of them, and the device decides between them later."""
    kept: list[Mention] = []
    for mention in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if all(mention.end <= other.start or mention.start >= other.end or
               (mention.start, mention.end) == (other.start, other.end) for other in kept):
            kept.append(mention)
    return sorted(kept, key=lambda m: m.start)


def _collect(mentions: list[Mention], entities: tuple[Entity, ...]) -> Mentions:
    devices: list[str] = []
    sensors: list[tuple[str, str]] = []
    codes: list[str] = []
    for mention in mentions:
        if mention.label == "DEVICE" and mention.canonical not in devices:
            devices.append(mention.canonical)
        elif mention.label == "SENSOR" and (mention.device_id, mention.canonical) not in sensors:
            sensors.append((mention.device_id or "", mention.canonical))
        elif mention.label == "FAULT_CODE" and mention.text not in codes:
            # As printed: the manual tool normalises and knows which spellings are one code.
            codes.append(mention.text)
    return Mentions(devices=devices, sensors=sensors, fault_codes=codes, entities=entities)
