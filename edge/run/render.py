"""The answer document as plain text: what `fixloop ask`, the MES payload and a model-free client read.

The order is the technician's: what really answered (the mode), hazards before anything they might start
doing, a safety verdict, the planner's summary (labelled), the manual's entry with its causes, the plant's
isolation before the manual's steps, readings with their verdicts, the order, past fixes (a technician's
unverified report said to be one), then what the tools could not say and what was not checked.
"""

from __future__ import annotations

from edge.run.compose import age_text
from edge.run.document import AnswerDocument, Cited, FaultEntry, PastFix, Reading, WorkOrderSection
from edge.run.phrases import PHRASES
from edge.run.record import cap_text

# A past fix's cause, remedy and parts are each cut to this in an answer.
FIX_TEXT_CHARS = 160


def render_text(doc: AnswerDocument) -> str:
    words = PHRASES[doc.language]
    lines: list[str] = list(doc.notices)
    mode = _mode_line(doc, words)
    if mode:
        lines.append(mode)
    for statement in doc.safety:
        signal = words.get(f"signal_{statement.signal_word}", statement.signal_word.upper())
        lines.append(words["safety"].format(label=signal, where=_where(statement.cited, words), text=statement.text))
    lines.extend(judgement.text for judgement in doc.judgements)
    if doc.prose and doc.prose.sentences:
        lines.append(words["prose"])
        lines.append(" ".join(doc.prose.sentences))
    isolation_shown = False
    for entry in doc.entries:
        lines.extend(_entry_lines(entry, words))
        if entry.steps and not isolation_shown:
            lines.extend(_isolation_lines(doc, words))
            isolation_shown = True
        if entry.steps:
            lines.append(words["steps"])
            lines.extend(f"  {n}. {step}" for n, step in enumerate(entry.steps, 1))
    if not isolation_shown:
        lines.extend(_isolation_lines(doc, words))
    lines.extend(_reading_line(reading, words) for reading in doc.readings)
    lines.extend(_order_line(order, words) for order in doc.work_orders)
    lines.extend(doc.other)
    lines.extend(_fix_line(fix, words) for fix in doc.past_fixes)
    lines.extend(doc.notes)
    if doc.missing:
        lines.append(words["missing"].format(items="; ".join(doc.missing)))
    return "\n".join(lines)


def _mode_line(doc: AnswerDocument, words: dict[str, str]) -> str:
    if doc.mode == "model":
        return ""
    return words[f"mode_{doc.mode}"].format(why=doc.mode_reason or "?")


def _where(cited: Cited, words: dict[str, str]) -> str:
    return words["where"].format(manual=cited.manual or "?", version=cited.version or "?", page=cited.page or "?")


def _entry_lines(entry: FaultEntry, words: dict[str, str]) -> list[str]:
    where = _where(entry.cited, words)
    if entry.kind == "page":  # no structured entry: the page's own words, quoted
        return [words["manual_page"].format(where=where, ocr=words["ocr"] if entry.ocr else "", snippet=entry.snippet)]
    # An entry read from a scanned page is OCR text too: the technician checks it against the page.
    line = words["manual"].format(heading=entry.heading, where=where + (words["ocr"] if entry.ocr else ""))
    if entry.scope:
        line = f"{line}; {words['scope'].format(scope=entry.scope)}"
    if entry.applies_to_device is False:
        line = f"{line}; {words['other_machine']}"
    lines = [line]
    if entry.causes:
        lines.append(words["causes_by_evidence"] if entry.causes_by_evidence else words["causes_manual_order"])
        for n, cause in enumerate(entry.causes, 1):
            why = "; ".join(cause.evidence)
            lines.append(f"  {n}. {cause.text}" + (f" — {why}" if why else ""))
    return lines


def _isolation_lines(doc: AnswerDocument, words: dict[str, str]) -> list[str]:
    lines = []
    for step in doc.isolation:
        if step.n == 1:
            lines.append(words["isolation"].format(device=step.device_id, sources=", ".join(step.energy_sources)))
        lines.append(f"  {step.n}. {step.text}")
    return lines


def _reading_line(reading: Reading, words: dict[str, str]) -> str:
    if reading.value is None:
        return words["reading_bad"].format(label=reading.label, text=reading.text)
    fields = {"label": reading.label, "value": reading.value, "unit": reading.unit, "quality": reading.quality}
    time_read = reading.timestamp or "?"
    if reading.cited.source == "cached_reading":
        line = words["reading_cache"].format(**fields, age=age_text(reading.age_s), time=time_read)
    else:
        line = words["reading_live"].format(**fields, time=time_read)
    line = words["verdict"].format(line=line, verdict=reading.verdict_text)
    return f"{line}; {reading.trend}" if reading.trend else line


def _order_line(order: WorkOrderSection, words: dict[str, str]) -> str:
    key = {"proposed": "order_pending", "created": "order_new", "existing": "order_existing"}[order.kind]
    return words[key].format(
        id=order.id, device=order.device_id, code=order.code, priority=order.priority, status=order.status
    )


def _fix_line(fix: PastFix, words: dict[str, str]) -> str:
    parts = ", ".join(fix.parts)
    # The gist of each: the whole text is in the order, and a long one would crowd the answer out.
    found = [
        words[key].format(text=cap_text(text, FIX_TEXT_CHARS))
        for key, text in (("fix_cause", fix.cause), ("fix_remedy", fix.remedy), ("fix_parts", parts))
        if text
    ]
    what = words["fix_sep"].join(found) or words["fix_unrecorded"]
    if fix.cited.source == "unverified_report":
        return words["fix_unverified"].format(by=fix.reported_by or "?", date=fix.date, what=what)
    key = "fix" if fix.same_device else "fix_other"
    return words[key].format(id=fix.id, device=fix.device_id, date=fix.date, what=what)
