"""Is every fact in an answer backed by what the tools returned? The anti-hallucination check.

A fact is a fault code, a work-order id or a number. The evidence is every
observation of the run (texts and field values), the question itself (an
answer may repeat what it was told) and the plant's own vocabulary (device
and sensor names like "press-3" or "3号液压机"). The check:

1. Mask every verbatim evidence string in the answer (manual file names,
   versions, copied step texts, device names), longest first: copied text is
   grounded by definition, and its digits are no claims of their own.
2. List enumerators ("1. ", "2) ", "3、") are structure, not values: mask them.
3. What remains: every work-order id must be an id an observation returned;
   every fault code must be a code an observation or the question names;
   every number must equal an evidence number to the precision the answer
   writes it with (61 matches 61.234; 61.3 does not match 61.234), and a
   duration ("5 min", "2 h", "30 秒") must match an evidence number of seconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from knowledge.code_linker import CodeLinker
from knowledge.codes import canonical_id
from edge.answer import language_of
from tools.observation import Observation
from tools.plant import DeviceConfig

ORDER_ID = re.compile(r"\bWO-[0-9A-F]{6,}\b", re.I)
_ENUMERATOR = re.compile(r"(?:(?<=\n)|^|(?<=[.;:。；：]\s)|(?<=[.;:。；：]))\s*\d{1,2}(?:[.)](?=\s)|、)", re.M)
# Digits glued to words count too ("400V", "第12页"); a sign is not kept: values are compared by magnitude.
_NUMBER = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
_DURATION = re.compile(r"^\s*(s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|秒|分钟|分|小时)(?![A-Za-z])", re.I)
_SECONDS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1,
            "min": 60, "mins": 60, "minute": 60, "minutes": 60, "分钟": 60, "分": 60,
            "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "小时": 3600}
# Strings this short are too common to mask as copied evidence ("ok", "V2", "3").
MIN_MASK_CHARS = 3
MASK = "\x00"


@dataclass(frozen=True)
class Claim:
    kind: str  # fault_code | work_order | number
    text: str


@dataclass(frozen=True)
class Evidence:
    strings: frozenset[str]
    codes: frozenset[str]
    order_ids: frozenset[str]
    numbers: tuple[float, ...]


def collect_evidence(observations: Iterable[Observation], question: str = "",
                     devices: dict[str, DeviceConfig] | None = None, extra: Iterable[str] = ()) -> Evidence:
    strings: set[str] = set()
    numbers: list[float] = []
    order_ids: set[str] = set()
    for obs in observations:
        _walk(obs.payload(), strings, numbers)
        for item in obs.content:
            if item.fields.get("work_order_id"):
                order_ids.add(str(item.fields["work_order_id"]).upper())
    told = [question, *extra]
    strings.update(t for t in told if t)
    strings.update(_vocabulary(devices or {}))
    for text in list(strings):
        numbers.extend(_numbers_in(text))
    linker = CodeLinker()
    codes = {canonical_id(str(s)) for s in strings if _looks_like_code_field(s)}
    for text in strings:
        codes.update(m.canonical_id for m in linker.mentions(text, language_of(text)))
    return Evidence(frozenset(s for s in strings if len(s) >= MIN_MASK_CHARS), frozenset(codes),
                    frozenset(order_ids), tuple(numbers))


def claims(answer: str, evidence: Evidence) -> list[Claim]:
    """The facts an answer states that copied text does not already cover."""
    # NFKC turns a full-width colon into ":", which would glue "液位：71" into a code shape.
    text = _mask(answer, evidence.strings).replace("：", ": ")
    found: list[Claim] = []
    for match in ORDER_ID.finditer(text):
        found.append(Claim("work_order", match.group(0).upper()))
    text = ORDER_ID.sub(MASK, text)
    linker = CodeLinker(_bare_codes(evidence.codes))
    spans = []
    for mention in linker.mentions(text, language_of(text)):
        found.append(Claim("fault_code", mention.canonical_id))
        spans.append((mention.start, mention.end))
    text = _blank(text, spans)
    text = _ENUMERATOR.sub(lambda m: MASK * len(m.group(0)), text)
    for match in _NUMBER.finditer(text):
        found.append(Claim("number", match.group(0) + _duration_suffix(text, match.end())))
    return found


def ungrounded(answer: str, evidence: Evidence) -> list[str]:
    """The facts in `answer` that no observation, the question or the plant vocabulary backs; [] = grounded."""
    missing: list[str] = []
    for claim in claims(answer, evidence):
        if claim.kind == "work_order" and claim.text not in evidence.order_ids:
            missing.append(f"work order {claim.text}")
        elif claim.kind == "fault_code" and claim.text not in evidence.codes:
            missing.append(f"fault code {claim.text.removeprefix('fault:')}")
        elif claim.kind == "number" and not _number_backed(claim.text, evidence.numbers):
            missing.append(f"value {claim.text}")
    return missing


def _walk(value: Any, strings: set[str], numbers: list[float]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _walk(item, strings, numbers)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, strings, numbers)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, (int, float)):
        numbers.append(float(value))
    else:
        strings.add(str(value))


def _vocabulary(devices: dict[str, DeviceConfig]) -> set[str]:
    words: set[str] = set()
    for device in devices.values():
        words.update({device.id, device.name, device.name_zh, device.vendor, device.model, *device.synonyms})
        for sensor in device.sensors.values():
            words.update({sensor.id, sensor.label, sensor.label_zh, sensor.unit, *sensor.synonyms})
    return {w for w in words if w}


def _looks_like_code_field(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Z0-9][A-Z0-9:._/-]{0,31}", text)) and any(c.isdigit() for c in text)


def _bare_codes(codes: Iterable[str]) -> list[str]:
    # The linker needs bare numeric codes (6065) spelled out to see them; strong shapes it finds alone.
    return [code.removeprefix("fault:") for code in codes if code.removeprefix("fault:").isdigit()]


def _mask(answer: str, strings: Iterable[str]) -> str:
    text = answer
    for s in sorted(strings, key=len, reverse=True):
        if any(c.isdigit() for c in s) and s in text:
            text = text.replace(s, MASK * len(s))
    return text


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in spans:
        text = text[:start] + MASK * (end - start) + text[end:]
    return text


def _numbers_in(text: str) -> list[float]:
    values = []
    for match in _NUMBER.finditer(text):
        value = _as_float(match.group(0))
        if value is not None:
            values.append(value)
    return values


def _as_float(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _duration_suffix(text: str, end: int) -> str:
    match = _DURATION.match(text[end:])
    return f" {match.group(1)}" if match else ""


def _number_backed(claim: str, numbers: tuple[float, ...]) -> bool:
    number, _, unit = claim.partition(" ")
    value = _as_float(number)
    if value is None:
        return True
    decimals = len(number.partition(".")[2])
    half_step = 0.5 * 10 ** -decimals + 1e-9
    scale = _SECONDS.get(unit.lower(), 1) if unit else 1
    low, high = (value - half_step) * scale, (value + half_step) * scale
    if any(low <= abs(n) <= high for n in numbers):
        return True
    # A duration may also be stated in the unit the observation used.
    return bool(unit) and any(value - half_step <= abs(n) <= value + half_step for n in numbers)
