"""Verdicts by code: how a reading stands against the plant's limits, and whether a device is safe to touch.

A technician asking "is the oil too hot?" or "is it safe to open the drive cabinet?" wants a judgement,
not a bare number: each reading is shown with its limits and a verdict in words, and a question whether
something is safe to do on a device the plant gave a zero-energy signal gets the plant's rule applied to
its reading. The signal's OPC UA quality is what it is, signal quality; never a yes.
"""

from __future__ import annotations

import re
from typing import Any

from edge.run.document import Verdict

# Asks whether something may be done now: open, touch, work on, start, enter. A plain "is it safe?" too.
_SAFETY_QUESTION = re.compile(
    r"\bsafe(?:ly)?\b|\bok(?:ay)? to\b|\bcan i (?:open|touch|reach|enter|work|start|remove|disconnect)\b"
    # 安全 alone names parts too (安全阀, 安全门): only asked about ("安全吗", "是否安全").
    r"|安全(?:吗|嘛|不|么)|是否安全|安不安全|能不能(?:打开|开|碰|摸|拆|启动)|可以(?:打开|开|碰|摸|拆|启动)|能(?:打开|碰|摸|拆)",
    re.I,
)


def verdict_of(f: dict[str, Any]) -> Verdict:
    """A reading observation item's fields judged: the tool already flags outliers and alarms by the plant's limits."""
    if f.get("value") is None:
        return "no_value"
    if f.get("is_outlier"):
        return "suspect"
    if f.get("alarm") == "high":
        return "past_high_alarm"
    if f.get("alarm") == "low":
        return "past_low_alarm"
    return "within_limits"


def verdict_text(f: dict[str, Any], verdict: Verdict, words: dict[str, str]) -> str:
    unit = f.get("unit", "")
    if verdict == "no_value":
        return words["verdict_no_value"]
    if verdict == "suspect":
        low, high = f.get("plausible_range") or ("?", "?")
        return words["verdict_suspect"].format(lo=_num(low), hi=_num(high), unit=unit)
    if verdict == "within_limits":
        limits = _limits(f, words, unit)
        return words["verdict_within"].format(limits=limits) if limits else words["verdict_within_bare"]
    side = "high" if verdict == "past_high_alarm" else "low"
    return words[f"verdict_past_{side}"].format(value=_num(f.get(f"alarm_{side}")), unit=unit).strip()


def _limits(f: dict[str, Any], words: dict[str, str], unit: str) -> str:
    parts = []
    if f.get("alarm_low") is not None:
        parts.append(words["limit_low"].format(value=_num(f["alarm_low"]), unit=unit).strip())
    if f.get("alarm_high") is not None:
        parts.append(words["limit_high"].format(value=_num(f["alarm_high"]), unit=unit).strip())
    return words["limit_sep"].join(parts)


def asks_if_safe(question: str) -> bool:
    return bool(_SAFETY_QUESTION.search(question))


def safety_judgement(f: dict[str, Any], words: dict[str, str], label: str) -> tuple[bool | None, str] | None:
    """The plant's zero-energy rule on this reading, when the PLC tool says the sensor is its device's
    zero-energy signal (`zero_energy`: {"below": 30, "met": false}); it decides `met` by the plant's rule."""
    signal = f.get("zero_energy")
    if not isinstance(signal, dict):
        return None
    unit = f.get("unit", "")
    rule = (
        words["rule_below"].format(value=_num(signal["below"]), unit=unit)
        if signal.get("below") is not None
        else words["rule_equals"].format(value=_num(signal.get("equals")), unit=unit)
    ).strip()
    value = f.get("value")
    if value is None or f.get("is_outlier"):
        return None, words["unsafe_unknown"].format(label=label, rule=rule)
    if f.get("source") != "live":  # a cached value says nothing about the cabinet now
        return None, words["unsafe_cached"].format(label=label, value=_num(value), unit=unit, rule=rule).strip()
    if signal.get("met"):
        return True, words["safe_zero_energy"].format(label=label, value=_num(value), unit=unit, rule=rule).strip()
    return False, words["unsafe_energised"].format(label=label, value=_num(value), unit=unit, rule=rule).strip()


def _num(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)
