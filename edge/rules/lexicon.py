"""Finding devices, sensors and fault codes in a question (English and Chinese).

Every match becomes an entity labelled DEVICE, SENSOR or FAULT_CODE whose
`kb_id_` is the canonical id (`press-3`, `coolant_level`, `fault:E102`).
Entities are resolved as they were on a spaCy blank Chinese pipeline (one
token per character): a match that does not start and end on a token is left
out, and of overlapping matches the longest (then the first) is kept. The synonym
lexicon comes from the plant config, so a plant adds words without touching
code. A machine named with a number the plant does not have ("line-4",
"press 9", "5号液压机") is an UNKNOWN_DEVICE, not a fault code; codes typed
loosely ("E1O2", "e.103") are found by `edge.rules.loose_codes`.

Fault codes come from `knowledge.code_mentions`: the spaCy code linker's
reading, without importing spaCy for plain English text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from edge.rules.loose_codes import LooseCodes
from edge.run import language_of
from knowledge.code_mentions import CodeMention, CodeMentions
from knowledge.codes import CUE_EN, canonical_id, code_key, lookup_keys, reported_code
from tools.plant import DeviceConfig, normalize_name

_CJK = re.compile(r"[\u3400-\u9fff]")
# A machine named with a number ("line-4", "robot_2"): the shape of a code, but the word is no code cue.
_NUMBERED_NAME = re.compile(r"(?<![\w-])([A-Za-z]{3,})[-_]\d{1,4}(?![\w-])")
_CODE_CUE = re.compile(CUE_EN, re.I)
# A machine's number right after a machine word ("hydraulic press 9") or "N号" right before one ("5号液压机").
# Two digits at most after a word: "cnc-7 6065" is a machine and its code.
_NUMBER_AFTER = re.compile(r"[\s-]?\d{1,2}(?![\w])")
_NUMBER_BEFORE = re.compile(r"\d{1,4}\s*号\s*$")


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
    # Machines named in the question that the plant does not have ("line-4", "5号液压机"), as written.
    unknown_devices: list[str] = field(default_factory=list)
    # Non-overlapping, in text order.
    entities: tuple[Entity, ...] = ()

    @property
    def doc(self) -> _Entities:
        """`doc.ents`, as readers of the former spaCy `Doc` expect it."""
        return _Entities(self.entities)


class Lexicon:
    def __init__(self, devices: dict[str, DeviceConfig], known_codes: Iterable[str] = ()):
        self._known = frozenset(known_codes)
        self._loose = LooseCodes(self._known)
        self._known_keys = frozenset(code_key(code) for code in self._known)
        self._codes = CodeMentions(self._known)
        self._devices = devices
        terms: dict[str, list[tuple[str, str, str | None]]] = {}
        for device in devices.values():
            for word in {device.id, device.name, device.name_zh, *device.synonyms} - {""}:
                terms.setdefault(word.lower(), []).append(("DEVICE", device.id, None))
            for sensor in device.sensors.values():
                for word in {
                    sensor.id,
                    sensor.id.replace("_", " "),
                    sensor.label,
                    sensor.label_zh,
                    *sensor.synonyms,
                } - {""}:
                    terms.setdefault(word.lower(), []).append(("SENSOR", sensor.id, device.id))
        self._terms = terms
        self._numbered_names = {
            normalize_name(word)
            for device in devices.values()
            for word in (device.id, device.name, device.name_zh, *device.synonyms)
            if any(char.isdigit() for char in word)
        }
        # The word part of the plant's own ids ("press", "cnc"): "press 9" and "CNC-12" are machines too.
        stems = sorted(
            {match.group(0).lower() for device_id in devices if (match := re.match(r"[A-Za-z]{2,}", device_id))}
        )
        self._stem_pattern = (
            re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, stems))})[\s_-]?\d{{1,2}}(?![\w-])", re.I)
            if stems
            else None
        )
        # Longest first, so "coolant level" wins over "coolant" and "3号液压机" over "液压机".
        alternatives = sorted(terms, key=len, reverse=True)
        self._pattern = re.compile("|".join(_term_regex(term) for term in alternatives)) if alternatives else None

    def warm(self) -> None:
        """Load the spaCy code linker now, for the text that the plain reading does not cover."""
        self._codes.warm()

    def find(self, text: str) -> Mentions:
        terms = _without_overlaps(self._term_mentions(text))
        unknown = self._unknown_devices(text, terms)
        terms = [t for t in terms if _apart(t, unknown)]
        # A device id such as "Press-3" also has the shape of a code; the plant's own words win.
        codes = [
            Mention(
                "FAULT_CODE",
                code.canonical_id,
                self._as_known(_as_printed(code.code, code.canonical_id)),
                code.start,
                code.end,
            )
            for code in self._code_mentions(text)
            if _apart(code, terms + unknown)
        ]
        codes += [
            Mention("FAULT_CODE", canonical_id(code.code), code.code, code.start, code.end)
            for code in self._loose.find(text)
            if _apart(code, terms + unknown + codes)
        ]
        mentions = sorted(terms + codes + unknown, key=lambda m: m.start)
        return _collect(mentions, _entities(text, mentions))

    def _numbered_name_is_known(self, name: str) -> bool:
        """ "the press 3" ends in "press 3", "machining centre 7" ends "CNC machining centre 7": names of the
        plant's machines. "5号液压机" ends in "液压机" too, but that names no number."""
        wanted = normalize_name(name)
        return any(
            known.endswith(wanted) or (wanted.endswith(known) and any(char.isdigit() for char in known))
            for known in self._numbered_names
        )

    def _as_known(self, printed: str) -> str:
        """A code shape the manuals do not know, that is a known code typed loosely (`O4101` for `04101`),
        as the manuals print it; any other code as printed."""
        if any(key in self._known_keys for key in lookup_keys(printed)):
            return printed
        return self._loose.resolve(reported_code(printed)) or self._loose.resolve(printed) or printed

    def _unknown_devices(self, text: str, terms: list[Mention]) -> list[Mention]:
        """Machines with a number that the plant does not have: "line-4", "press 9", "hydraulic press 9",
        "5号液压机". Named in the answer as unknown, never looked up as fault codes."""
        spans = [
            m.span()
            for m in _NUMBERED_NAME.finditer(text)
            if not _CODE_CUE.fullmatch(m.group(1)) and code_key(m.group(0)) not in self._known_keys
        ]
        if self._stem_pattern is not None:
            spans += [m.span() for m in self._stem_pattern.finditer(text)]
        for term in terms:
            if term.label != "DEVICE":
                continue
            after = _NUMBER_AFTER.match(text, term.end)
            if after and term.text[-1:].isalpha() and not _CJK.search(term.text):
                spans.append((term.start, after.end()))
            before = _NUMBER_BEFORE.search(text, 0, term.start)
            if before:
                spans.append((before.start(), term.end))
        found: list[Mention] = []
        for start, end in sorted(set(spans)):
            mention = Mention("UNKNOWN_DEVICE", text[start:end], text[start:end], start, end)
            if not self._numbered_name_is_known(mention.text) and _apart(mention, found):
                found.append(mention)
        return found

    def _code_mentions(self, text: str) -> list[CodeMention]:
        return self._codes.find(text, language_of(text))

    def _term_mentions(self, text: str) -> list[Mention]:
        if self._pattern is None:
            return []
        found = []
        for match in self._pattern.finditer(text.lower()):
            for label, canonical, device_id in self._terms[match.group(0)]:
                found.append(
                    Mention(label, canonical, text[match.start() : match.end()], match.start(), match.end(), device_id)
                )
        return found


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
    return tuple(
        Entity(m.label, m.canonical, m.start, m.end, text[m.start : m.end])
        for _, _, m in sorted(kept, key=lambda s: s[0])
    )


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


class _Span(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def _apart(mention: _Span, others: list[Mention]) -> bool:
    return all(mention.end <= other.start or mention.start >= other.end for other in others)


def _without_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the longest term where two overlap ("coolant level" over "coolant"); a synonym shared by
    several sensors keeps all of them, and the device decides between them later."""
    kept: list[Mention] = []
    for mention in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if all(
            mention.end <= other.start
            or mention.start >= other.end
            or (mention.start, mention.end) == (other.start, other.end)
            for other in kept
        ):
            kept.append(mention)
    return sorted(kept, key=lambda m: m.start)


def _collect(mentions: list[Mention], entities: tuple[Entity, ...]) -> Mentions:
    devices: list[str] = []
    sensors: list[tuple[str, str]] = []
    codes: list[str] = []
    unknown: list[str] = []
    for mention in mentions:
        if mention.label == "DEVICE" and mention.canonical not in devices:
            devices.append(mention.canonical)
        elif mention.label == "SENSOR" and (mention.device_id, mention.canonical) not in sensors:
            sensors.append((mention.device_id or "", mention.canonical))
        elif mention.label == "FAULT_CODE" and mention.text not in codes:
            # As printed: the manual tool normalises and knows which spellings are one code.
            codes.append(mention.text)
        elif mention.label == "UNKNOWN_DEVICE" and mention.text not in unknown:
            unknown.append(mention.text)
    return Mentions(devices=devices, sensors=sensors, fault_codes=codes, unknown_devices=unknown, entities=entities)
