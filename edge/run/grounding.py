"""Is every fact in an answer backed by what the tools returned? The anti-hallucination check.

The loop runs it on every final answer before a technician sees it (`edge.run.verification`), and
`fixloop eval` scores answers with it: one checker, so what the suite measures is what the loop
enforces.

A fact is a fault code, a work-order id, a manual file name, a page or a number. The evidence is every
observation of the run (texts and field values), the question itself (an
answer may repeat what it was told) and the plant's own vocabulary (device
and sensor names like "press-3" or "3号液压机"). The check:

1. Mask every verbatim evidence string in the answer (manual file names,
   versions, copied step texts, device names), longest first: copied text is
   grounded by definition, and its digits are no claims of their own.
2. List enumerators ("1. ", "2) ", "3、") are structure, not values: mask them.
3. Manual file names and pages are read from the answer as written (before masking): a manual must
   be one a manual search returned, a page one of its pages.
4. What remains: every work-order id must be an id a work-order call created or found (a proposal
   awaiting confirmation is no order; the closed orders it lists as past fixes are found ones);
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

from edge.run.phrases import language_of
from knowledge.code_mentions import CodeMentions
from knowledge.codes import canonical_id
from tools.manual_search.tool import ManualSearchTool
from tools.observation import Observation
from tools.plant import DeviceConfig
from tools.plc.tool import PlcReadTool
from tools.work_orders.tool import WorkOrderTool

ORDER_ID = re.compile(r"\bWO-[0-9A-F]{6,}\b", re.I)
WORK_ORDER_TOOL = WorkOrderTool.name
# The tools' own names are the system's words, no facts about the plant: a model that names a tool it did not
# call ("read_plc_sensor_value is missing") says nothing true, but it invents no fault code READPLCSENSORVALUE
# (and `sentence_support` still refuses the sentence).
TOOL_NAMES = (ManualSearchTool.name, PlcReadTool.name, WorkOrderTool.name)
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
_MANUAL_NAME = re.compile(r"[\w.\-]+\.pdf\b", re.I)
_PAGE = re.compile(r"\b(?:pp?\.|pages?)\s*(\d+)|第\s*(\d+)\s*页", re.I)
_ENUMERATOR = re.compile(r"(?:(?<=\n)|^|(?<=[.;:。；：]\s)|(?<=[.;:。；：]))\s*\d{1,2}(?:[.)](?=\s)|、)", re.M)
# Digits glued to words count too ("400V", "第12页"); a sign is not kept: values are compared by magnitude.
_NUMBER = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
_DURATION = re.compile(r"^\s*(s|sec|secs|seconds?|min|mins|minutes?|h|hrs?|hours?|秒|分钟|分|小时)(?![A-Za-z])", re.I)
_SECONDS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "秒": 1,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "分钟": 60,
    "分": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "小时": 3600,
}
# Strings this short are too common to mask as copied evidence ("ok", "V2", "3").
MIN_MASK_CHARS = 3
MASK = "\x00"


@dataclass(frozen=True)
class Claim:
    kind: str  # fault_code | work_order | manual | page | number
    text: str


@dataclass(frozen=True)
class Evidence:
    strings: frozenset[str]
    codes: frozenset[str]
    order_ids: frozenset[str]
    numbers: tuple[float, ...]
    manuals: frozenset[str] = frozenset()
    pages: frozenset[int] = frozenset()


def collect_evidence(
    observations: Iterable[Observation],
    question: str = "",
    devices: dict[str, DeviceConfig] | None = None,
    extra: Iterable[str] = (),
) -> Evidence:
    strings: set[str] = set()
    numbers: list[float] = []
    order_ids: set[str] = set()
    manuals: set[str] = set()
    pages: set[int] = set()
    for obs in observations:
        _walk(obs.payload(), strings, numbers)
        for item in obs.content:
            f = item.fields
            if f.get("work_order_id") and _order_exists(obs, f):
                order_ids.add(str(f["work_order_id"]).upper())
            if f.get("past_work_order_id") and obs.tool == WORK_ORDER_TOOL:  # a closed order the call found
                order_ids.add(str(f["past_work_order_id"]).upper())
            if f.get("manual"):
                manuals.add(str(f["manual"]).lower())
            if str(f.get("page", "")).isdigit():
                pages.add(int(f["page"]))
    told = [t for t in (question, *extra) if t]
    strings.update(told)
    for text in told:  # what the technician or the session summary said may be said back
        manuals.update(m.group(0).lower() for m in _MANUAL_NAME.finditer(text))
        pages.update(int(m.group(1) or m.group(2)) for m in _PAGE.finditer(text))
    linker = CodeMentions()
    codes = {canonical_id(str(s)) for s in strings if _looks_like_code_field(s)}
    for text in strings:  # a manual's file name is a citation (checked as such), not a list of codes
        text = _MANUAL_NAME.sub(" ", text)
        codes.update(m.canonical_id for m in linker.find(text, language_of(text)))
    # The plant's own names are masked and their numbers count ("3号液压机"); they name machines
    # and sensors, not codes (and reading them would load spaCy for every English answer).
    vocabulary = _vocabulary(devices or {})
    strings.update(vocabulary)
    # Their identifiers ("oil_temp", "read_plc_sensor_value") have a code's shape to the linker: no code claims.
    codes.update(canonical_id(word) for word in vocabulary if _IDENTIFIER.fullmatch(word))
    for text in list(strings):
        numbers.extend(_numbers_in(text))
    return Evidence(
        frozenset(s for s in strings if len(s) >= MIN_MASK_CHARS),
        frozenset(codes),
        frozenset(order_ids),
        tuple(numbers),
        frozenset(manuals),
        frozenset(pages),
    )


def claims(answer: str, evidence: Evidence) -> list[Claim]:
    """The facts an answer states that copied text does not already cover."""
    # Manuals, pages and order ids are read as written: an order id an observation merely mentions (a
    # proposal) or a made-up manual name must not hide behind the masking of copied text. A manual name
    # (a claim of its own) and a page that is not backed are blanked, so their letters and digits are not
    # read again as a code or a value.
    found = [Claim("manual", m.group(0).lower()) for m in _MANUAL_NAME.finditer(answer)]
    found += [Claim("page", m.group(1) or m.group(2)) for m in _PAGE.finditer(answer)]
    found += [Claim("work_order", m.group(0).upper()) for m in ORDER_ID.finditer(answer)]
    text = _MANUAL_NAME.sub(lambda m: MASK * len(m.group(0)), answer)
    text = _PAGE.sub(
        lambda m: m.group(0) if int(m.group(1) or m.group(2)) in evidence.pages else MASK * len(m.group(0)), text
    )
    # NFKC turns a full-width colon into ":", which would glue "液位：71" into a code shape.
    text = _mask(ORDER_ID.sub(lambda m: MASK * len(m.group(0)), text), evidence.strings).replace("：", ": ")
    linker = CodeMentions(_bare_codes(evidence.codes))
    spans = []
    for mention in linker.find(text, language_of(text)):
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
        elif claim.kind == "manual" and claim.text not in evidence.manuals:
            missing.append(f"manual {claim.text}")
        elif claim.kind == "page" and int(claim.text) not in evidence.pages:
            missing.append(f"page {claim.text}")
        elif claim.kind == "number" and not _number_backed(claim.text, evidence.numbers):
            missing.append(f"value {claim.text}")
    return missing


def _order_exists(obs: Observation, fields: dict[str, Any]) -> bool:
    """Only a work-order call that created or found an order backs its id."""
    return (
        obs.tool == WORK_ORDER_TOOL and obs.status == "ok" and fields.get("work_order_status") != "pending_confirmation"
    )


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
    words: set[str] = set(TOOL_NAMES)
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
    half_step = 0.5 * 10**-decimals + 1e-9
    scale = _SECONDS.get(unit.lower(), 1) if unit else 1
    low, high = (value - half_step) * scale, (value + half_step) * scale
    if any(low <= abs(n) <= high for n in numbers):
        return True
    # A duration may also be stated in the unit the observation used.
    return bool(unit) and any(value - half_step <= abs(n) <= value + half_step for n in numbers)
