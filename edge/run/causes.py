"""A fault entry's probable causes, ordered by this run's evidence.

A manual lists causes in its own order ("a low coolant level, a blocked or failed motor fan, or continuous
overload"). A technician wants the likely one first, and only evidence this run fetched may move it: a live
reading of a sensor the cause names that is past its alarm limit or trending the way the cause says (a
low coolant level read below its low limit), and the causes recorded when this machine's past orders for the
code were closed. A reading of that sensor that is normal counts against the cause. With no evidence the
manual's order stands; ties keep it too.

    ordered = order_causes(entry_fields, observations)   # [] when the entry names fewer than 2
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from edge.run.trust import unverified_report
from knowledge.glossary import concepts
from knowledge.text import terms
from tools.observation import Observation

# "Usual causes are", "Possible causes:", "原因：" before the list, and what separates its items.
_LEAD_IN = re.compile(
    r"^(?:(?:the\s+)?(?:usual|possible|probable|likely|common)\s+causes?(?:\s+(?:are|is|include))?\s*:?|causes?\s*:|"
    r"(?:可能的?|常见)?原因(?:有|是|为|包括)?\s*[:：]?)\s*",
    re.I,
)
# Commas, semicolons and bullets part the items; "or" inside one ("a blocked or failed fan") does not.
_ITEMS = re.compile(r"\s*(?:[;；、\n•·]|[,，]\s*(?:or|and|或者?|以及)?)\s*", re.I)
_LOW = re.compile(r"\b(?:low|insufficient|too little|lack|loss|drop(?:ped|s)?|under)\b|不足|过低|偏低|低|缺", re.I)
_HIGH = re.compile(r"\b(?:high|over\w*|excessive|too much|rising|hot)\b|过高|过热|偏高|过载|超", re.I)
# A past fix's cause shares this much of a listed cause's words (or its glossary concepts) to point at it.
PAST_FIX_OVERLAP = 0.5


@dataclass
class Cause:
    text: str
    # Evidence, each a (kind, fields) pair: ("reading_for" | "reading_against", the reading's fields) or
    # ("past_fix", the past fix's fields). The answer words them; the fields are the observation's own.
    evidence: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def weight(self) -> int:
        score = {"reading_for": 2, "past_fix": 1, "reading_against": -1}
        return sum(score[kind] for kind, _ in self.evidence)


def split_causes(text: str) -> list[str]:
    """The causes a cause field lists: its last sentence that says it lists causes ("Usual causes are",
    "原因：") and names several, split into items. A description with commas is not a list of causes."""
    sentences = [s for s in re.split(r"(?<=[.。!?])\s*", text.strip()) if s]
    for sentence in reversed(sentences):
        sentence = sentence.rstrip(".。")
        lead_in = _LEAD_IN.match(sentence)
        if lead_in is None or not lead_in.group(0):
            continue
        body = sentence[lead_in.end() :].strip()
        items = [item.strip(" .。") for item in _ITEMS.split(body) if item and item.strip(" .。")]
        if len(items) >= 2:
            return items
    return []


def order_causes(entry: dict[str, Any], observations: list[Observation]) -> list[Cause]:
    """The entry's causes (fields of a manual entry item), most supported first; [] for fewer than two."""
    causes = [Cause(text) for text in split_causes(str(entry.get("cause") or ""))]
    if len(causes) < 2:
        return []
    readings = [item.fields for obs in observations for item in obs.content if "sensor" in item.fields]
    fixes = [
        item.fields
        for obs in observations
        for item in obs.content
        if item.fields.get("past_work_order_id")
        and not unverified_report(item.fields)  # one person's word is no evidence
        and item.fields.get("same_device")
        and item.fields.get("cause")
        and str(item.fields.get("fault_code", "")).upper() == str(entry.get("fault_code", "")).upper()
    ]
    for cause in causes:
        for reading in readings:
            verdict = _reading_verdict(cause.text, reading)
            if verdict:
                cause.evidence.append((verdict, reading))
        cause.evidence.extend(("past_fix", fix) for fix in fixes if _same_cause(cause.text, str(fix["cause"])))
    return sorted(causes, key=lambda cause: -cause.weight)  # stable: the manual's order among equals


def _reading_verdict(cause: str, reading: dict[str, Any]) -> str | None:
    """ "reading_for" when the cause names the reading's sensor and the reading goes the cause's way,
    "reading_against" when it names it and the reading is normal, None when it does not name it or the
    value is not usable."""
    if reading.get("value") is None or reading.get("is_outlier") or not _names_sensor(cause, reading):
        return None
    low, high = bool(_LOW.search(cause)), bool(_HIGH.search(cause))
    side, trend = reading.get("alarm"), reading.get("trend")
    if (low and (side == "low" or trend == "falling")) or (high and (side == "high" or trend == "rising")):
        return "reading_for"
    if side is None and trend in (None, "steady", "unknown") and (low or high):
        return "reading_against"
    return None


def _names_sensor(cause: str, reading: dict[str, Any]) -> bool:
    said = set(terms(cause))
    for name in filter(None, (str(reading.get(key) or "") for key in ("sensor", "label", "label_zh"))):
        words = set(terms(name.replace("_", " ")))
        # A sensor's label carries its quantity ("Coolant level"): the cause must say all of its own words.
        if words and words <= said:
            return True
    return False


def _same_cause(listed: str, recorded: str) -> bool:
    mine, theirs = set(terms(listed)), set(terms(recorded))
    if mine and len(mine & theirs) >= PAST_FIX_OVERLAP * len(mine):
        return True
    named = _concepts(listed)
    shared = named & _concepts(recorded)
    return bool(shared) and len(shared) >= PAST_FIX_OVERLAP * len(named)


def _concepts(text: str) -> set[str]:
    return {name for _, _, name in concepts(text)}
