"""Finding devices, sensors and fault codes in a question (English and Chinese).

A spaCy blank Chinese pipeline gives one token per CJK character, so every
match found on the text maps onto tokens exactly with `doc.char_span`; the
matches become entities labelled DEVICE, SENSOR or FAULT_CODE whose
`ent_id_` is the canonical id (`press-3`, `coolant_level`, `fault:E102`).
The synonym lexicon comes from the plant config, so a plant adds words
without touching code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import spacy
from spacy.tokens import Doc

from knowledge.code_linker import CodeLinker
from knowledge.codes import code_key
from edge.answer import language_of
from tools.plant import DeviceConfig

_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class Mention:
    label: str  # DEVICE | SENSOR | FAULT_CODE
    canonical: str
    text: str
    start: int
    end: int
    device_id: str | None = None


@dataclass(frozen=True)
class Mentions:
    devices: list[str] = field(default_factory=list)
    # (device_id, sensor_id) pairs; device_id is the device the synonym belongs to.
    sensors: list[tuple[str, str]] = field(default_factory=list)
    fault_codes: list[str] = field(default_factory=list)
    doc: Doc | None = None


class Lexicon:
    def __init__(self, devices: dict[str, DeviceConfig], known_codes: Iterable[str] = ()):
        self._nlp = spacy.blank("zh")
        self._codes = CodeLinker(known_codes)
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

    def find(self, text: str) -> Mentions:
        doc = self._nlp(text)
        terms = _without_overlaps(self._term_mentions(text))
        # A device id such as "Press-3" also has the shape of a code; the plant's own words win.
        codes = [Mention("FAULT_CODE", code.canonical_id, _as_printed(code.code, code.canonical_id), code.start, code.end)
                 for code in self._codes.mentions(text, language_of(text))
                 if all(code.end <= t.start or code.start >= t.end for t in terms)]
        mentions = sorted(terms + codes, key=lambda m: m.start)
        spans = []
        for mention in mentions:
            span = doc.char_span(mention.start, mention.end, label=mention.label, kb_id=mention.canonical)
            if span is not None:
                spans.append(span)
        doc.ents = spacy.util.filter_spans(spans)
        return _collect(mentions, doc)

    def _term_mentions(self, text: str) -> list[Mention]:
        if self._pattern is None:
            return []
        found = []
        for match in self._pattern.finditer(text.lower()):
            for label, canonical, device_id in self._terms[match.group(0)]:
                found.append(Mention(label, canonical, text[match.start():match.end()], match.start(), match.end(), device_id))
        return found


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


def _collect(mentions: list[Mention], doc: Doc) -> Mentions:
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
    return Mentions(devices=devices, sensors=sensors, fault_codes=codes, doc=doc)
