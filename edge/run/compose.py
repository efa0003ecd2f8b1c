"""The answer document built from a run's observations by code, for every planner.

Safety statements, the plant's isolation steps, fault entries with their causes and steps, readings with
their limits and verdicts, work orders and past fixes come from what the tools returned, each with its
source: no planner writes them, so none can leave them out or say them otherwise. A planner adds its
prose (`edge.run.prose`) and the rules planner its notes; the loop sets the mode (`edge.run.loop`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from edge.run.causes import order_causes
from edge.run.document import (
    AnswerDocument,
    Cause,
    Cited,
    FaultEntry,
    IsolationStep,
    PastFix,
    Reading,
    SafetyJudgement,
    SafetyStatement,
    WorkOrderSection,
)
from edge.run.phrases import PHRASES, language_of
from edge.run.trust import unverified_report
from edge.run.verdicts import asks_if_safe, safety_judgement, verdict_of, verdict_text
from tools.observation import Observation

# Calls a tool refused as malformed: after a hand-over these are the model's mistakes, not facts about
# the plant, and a technician must not read a list of them (the rules planner builds its calls from the
# plant's own ids and never makes them).
_CALLER_MISTAKES = frozenset({"invalid_arguments", "unknown_tool", "unknown_sensor", "unknown_device"})
# Refusals meant for the planner that made the call (a work order for another machine, or none asked
# for): the technician reads what was done, not how the planner was corrected.
PLANNER_ONLY = _CALLER_MISTAKES | {"device_mismatch", "order_not_requested", "code_not_listed"}


def build_document(
    question: str,
    observations: Sequence[Observation],
    notes: Sequence[str] = (),
    missing: Sequence[str] = (),
) -> AnswerDocument:
    """`notes` are what the rules planner tells the technician instead of a tool result (ask a question,
    an unknown machine), in the question's language (`PHRASES`)."""
    language: Literal["en", "zh"] = "zh" if language_of(question) == "zh" else "en"
    words = PHRASES[language]
    doc = AnswerDocument(language=language, notes=list(notes), missing=list(missing))
    shown = [obs for obs in observations if obs.error_code not in PLANNER_ONLY and not obs.no_new_information]
    judge = asks_if_safe(question)
    for obs in shown:
        _add(doc, obs, words, shown, judge)
    doc.safety = list({(s.signal_word, s.text, s.cited.page): s for s in doc.safety}.values())
    doc.entries = _one_per_section(doc.entries)
    if not shown and not notes:
        doc.other.append(words["nothing"])
    return doc


def _one_per_section(entries: list[FaultEntry]) -> list[FaultEntry]:
    """Two searches in a run can find the same section (a model's words, then the rules'): it is shown once,
    where it first came, as the fuller of its readings (a search lists its lower hits without their steps)."""
    kept: dict[tuple[str, str, str | None, int | str | None], FaultEntry] = {}
    for entry in entries:
        key = (entry.code, entry.title, entry.cited.manual, entry.cited.page)
        first = kept.get(key)
        if first is None or len(entry.steps) + len(entry.causes) > len(first.steps) + len(first.causes):
            kept[key] = entry
    return list(kept.values())


def supporting_ids(observations: Sequence[Observation]) -> list[str]:
    return [obs.id for obs in observations if obs.status in ("ok", "degraded")]


def _cited(obs: Observation, source: Any, f: dict[str, Any] | None = None) -> Cited:
    f = f or {}
    return Cited(
        source=source, observation=obs.id, manual=f.get("manual"), version=f.get("version"), page=f.get("page")
    )


def _add(doc: AnswerDocument, obs: Observation, words: dict[str, str], context: list[Observation], judge: bool) -> None:
    """`context`: the run's observations, for what one observation's sections depend on (a cause's evidence);
    `judge`: the question asks whether something is safe to do, so a zero-energy signal's reading gets a verdict."""
    if obs.status == "error" and not any(item.kind == "ref" for item in obs.content):
        text = " ".join(item.text for item in obs.content if item.text)
        doc.other.append(words["error"].format(tool=obs.tool, text=text, error_code=obs.error_code or obs.status))
        return
    if obs.status == "not_found":
        # The tool's own sentence ("No manual section matches 'x'."), ended once.
        what = (" ".join(item.text for item in obs.content if item.text) or obs.tool).rstrip(". ")
        doc.other.append(words["not_found"].format(what=what + "."))
        return
    entry: FaultEntry | None = None
    for item in obs.content:
        f = item.fields
        if item.kind == "step":
            if entry is not None:
                entry.steps.append(item.text)
        elif item.kind == "safety":
            doc.safety.append(
                SafetyStatement(
                    signal_word=str(f.get("signal_word", "")), text=item.text, cited=_cited(obs, "manual", f)
                )
            )
        elif "fault_code" in f and "title" in f and "manual" in f:
            entry = _entry(obs, f, words, doc.language, context)
            doc.entries.append(entry)
        elif "isolation_step" in f:
            doc.isolation.append(
                IsolationStep(
                    n=int(f["isolation_step"]),
                    text=item.text,
                    device_id=str(f.get("device_id")),
                    energy_sources=list(f.get("energy_sources") or []),
                    cited=_cited(obs, "plant"),
                )
            )
        elif "sensor" in f:
            reading = _reading(obs, item.text, f, words, doc.language)
            doc.readings.append(reading)
            judged = safety_judgement(f, words, reading.label) if judge else None
            if judged is not None:
                doc.judgements.append(
                    SafetyJudgement(
                        device_id=reading.device_id,
                        sensor=reading.sensor,
                        safe=judged[0],
                        text=judged[1],
                        cited=reading.cited,
                    )
                )
        elif "work_order_status" in f:
            doc.work_orders.append(_order(obs, f))
        elif "past_work_order_id" in f:
            _add_fix(doc, _past_fix(obs, f))
        elif f.get("root_cause_candidate"):
            doc.other.append(
                words["root_cause"].format(
                    code=f.get("fault_code"),
                    device=f.get("device_id"),
                    count=f.get("recent_orders"),
                    days=f.get("window_days"),
                )
            )
        elif item.text and doc.language == "en":  # the tool's own prose is English
            doc.other.append(item.text)


def _entry(
    obs: Observation, f: dict[str, Any], words: dict[str, str], language: str, context: list[Observation]
) -> FaultEntry:
    causes = order_causes(f, context)
    return FaultEntry(
        code=str(f["fault_code"]),
        title=str(f["title"]),
        kind="page" if f.get("kind") == "page" else "entry",
        snippet=str(f.get("snippet") or ""),
        ocr=bool(f.get("ocr")),
        scope=f.get("scope") or None,
        applies_to_device=f.get("applies_to_device"),
        causes=[
            Cause(text=c.text, evidence=[_evidence_text(kind, ef, words, language) for kind, ef in c.evidence])
            for c in causes
        ],
        causes_by_evidence=any(c.evidence for c in causes),
        cited=_cited(obs, "manual", f),
    )


def _evidence_text(kind: str, f: dict[str, Any], words: dict[str, str], language: str) -> str:
    if kind == "past_fix":
        return words["cause_past_fix"].format(id=f.get("past_work_order_id"), date=str(f.get("closed_at") or "?")[:10])
    label = _label(f, language)
    if kind == "reading_against":
        return words["cause_reading_against"].format(label=label, value=f.get("value"), unit=f.get("unit", ""))
    side = words.get(f"side_{f.get('alarm')}", str(f.get("alarm")))
    why = words["alarm"].format(side=side) if f.get("alarm") else trend_note(f, words, f.get("unit", ""))
    return words["cause_reading_for"].format(label=label, value=f.get("value"), unit=f.get("unit", ""), why=why)


def _label(f: dict[str, Any], language: str) -> str:
    return str((language == "zh" and f.get("label_zh")) or f.get("label") or f.get("sensor"))


def _reading(obs: Observation, text: str, f: dict[str, Any], words: dict[str, str], language: str) -> Reading:
    verdict = verdict_of(f)
    plausible = f.get("plausible_range")
    return Reading(
        device_id=str(f.get("device_id")),
        sensor=str(f.get("sensor")),
        label=_label(f, language),
        value=f.get("value"),
        unit=str(f.get("unit") or ""),
        alarm_low=f.get("alarm_low"),
        alarm_high=f.get("alarm_high"),
        plausible_range=tuple(plausible) if plausible else None,
        verdict=verdict,
        verdict_text=verdict_text(f, verdict, words),
        quality=str(f.get("quality") or ""),
        timestamp=f.get("timestamp"),
        age_s=f.get("age_s"),
        trend=trend_note(f, words, str(f.get("unit") or "")) if f.get("trend") and verdict != "suspect" else None,
        text=text,
        cited=_cited(obs, "cached_reading" if f.get("source") == "cache_fallback" else "live_reading"),
    )


def trend_note(f: dict[str, Any], words: dict[str, str], unit: str) -> str:
    """The slope is printed with the digits the observation holds, so the grounding check finds it."""
    slope = f.get("trend_slope_per_min")
    signed = "?" if slope is None else ("+" if slope > 0 else "") + f"{slope:.12f}".rstrip("0").rstrip(".")
    return words[f"trend_{f['trend']}"].format(slope=signed, unit=unit, window=age_text(f.get("trend_window_s")))


def _order(obs: Observation, f: dict[str, Any]) -> WorkOrderSection:
    status = str(f.get("work_order_status"))
    kind: Literal["created", "existing", "proposed"] = (
        "proposed" if status == "pending_confirmation" else "created" if f.get("created") else "existing"
    )
    return WorkOrderSection(
        id=f.get("work_order_id"),
        device_id=str(f.get("device_id")),
        code=str(f.get("fault_code")),
        priority=f.get("priority"),
        status=status,
        kind=kind,
        cited=_cited(obs, "work_order_tool"),
    )


def _add_fix(doc: AnswerDocument, fix: PastFix) -> None:
    """The newest fix of each group (this machine or its model; recorded or reported) once, however many
    calls returned it: the rest stay in the trace, and a report never hides a recorded fix."""
    group = (fix.same_device, fix.cited.source)
    if all(f.id != fix.id and (f.same_device, f.cited.source) != group for f in doc.past_fixes):
        doc.past_fixes.append(fix)


def _past_fix(obs: Observation, f: dict[str, Any]) -> PastFix:
    unverified = unverified_report(f)
    return PastFix(
        id=str(f.get("past_work_order_id")),
        device_id=f.get("device_id"),
        same_device=f.get("same_device"),
        date=str(f.get("reported_at") or f.get("closed_at") or "?")[:10],
        cause=f.get("cause"),
        remedy=f.get("remedy"),
        parts=list(f.get("parts") or ()),
        reported_by=f.get("reported_by"),
        cited=_cited(obs, "unverified_report" if unverified else "recorded_fix"),
    )


def age_text(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
