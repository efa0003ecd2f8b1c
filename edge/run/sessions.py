"""The session summary: what earlier runs in a session did, in a few rule-built lines.

A follow-up ("and the coolant level?") needs the device, the fault code and
the key results of earlier steps, not their whole log: the summary is short
enough to sit in every prompt of the next run without crowding out its own
steps, and built by rules so it never invents anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from edge.run.planner import SessionContext
from edge.run.record import RunRecord, Step
from edge.run.store import device_of, fault_codes_of
from tools.manual_search.tool import ManualSearchTool
from tools.observation import Observation
from tools.plc.tool import PlcReadTool

MAX_LINES = 8
MAX_QUESTION_CHARS = 120


def session_context(records: list[RunRecord]) -> SessionContext:
    """Earlier runs of a session, oldest first, as the context of its next run."""
    lines: list[str] = []
    codes: list[str] = []
    listed: list[str] = []
    device_id: str | None = None
    for record in records:
        if (device_of(record) or device_id) != device_id:
            listed = []  # codes listed for another machine
        device_id = device_of(record) or device_id
        codes.extend(fault_codes_of(record))
        listed.extend(listed_codes(record.observations))
        lines.extend(summarize_run(record))
    # The latest lines matter most to a follow-up; older ones fall off first.
    return SessionContext(
        device_id=device_id,
        fault_codes=list(dict.fromkeys(codes)),
        summary=lines[-MAX_LINES:],
        sensors=sensors_read(records[-1], device_id) if records else [],
        listed_codes=list(dict.fromkeys(listed)),
    )


def listed_codes(observations: Iterable[Observation]) -> list[str]:
    """The fault codes a manual search listed for the asked machine (not entries for other machines)."""
    return [
        str(item.fields["fault_code"])
        for obs in observations
        if obs.tool == ManualSearchTool.name and obs.status in ("ok", "degraded")
        for item in obs.content
        if item.kind == "ref"
        and item.fields.get("fault_code")
        and item.fields.get("manual")
        and item.fields.get("applies_to_device") is not False
    ]


def sensors_read(record: RunRecord, device_id: str | None) -> list[str]:
    """The sensors `record` read on `device_id`, in order: the readings its answer named, failed ones too
    (a follow-up "try that again" means them as well)."""
    return list(
        dict.fromkeys(
            str(step.args["sensor"])
            for step in record.steps
            if step.action == PlcReadTool.name
            and isinstance(step.args, dict)
            and step.args.get("device_id") == device_id
            and step.args.get("sensor")
        )
    )


def summarize_run(record: RunRecord) -> list[str]:
    question = (
        record.question
        if len(record.question) <= MAX_QUESTION_CHARS
        else record.question[: MAX_QUESTION_CHARS - 1] + "…"
    )
    where = f" ({record.device_id})" if record.device_id else ""
    lines = [f"Asked{where}: {question}"]
    lines.extend(line for step in record.steps if (line := summarize_step(step)))
    return lines


def summarize_step(step: Step) -> str | None:
    if not step.action or step.observation is None:
        return None
    obs = step.observation
    args = (
        ", ".join(
            f"{key}={value}"
            for key, value in (step.args or {}).items()
            if key in ("device_id", "fault_code", "sensor", "query")
        )
        if isinstance(step.args, dict)
        else ""
    )
    results = key_results(obs)
    if obs.status in ("error", "not_found") and not results:
        return f"{step.action}({args}) -> {obs.status}{f' ({obs.error_code})' if obs.error_code else ''}"
    return f"{step.action}({args}) -> {obs.status}: {'; '.join(results[:2]) or 'no details'}"


def key_results(obs: Observation) -> list[str]:
    """What an observation found, a few words per item ("E230 Tool changer arm position error, p. 2",
    "spindle_speed 7734.0 rpm (live)"), built from its fields."""
    return [result for item in obs.content if item.kind == "ref" and (result := _key_result(item.fields))]


def _key_result(f: dict[str, Any]) -> str | None:
    if "work_order_status" in f:
        return f"work order {f.get('work_order_id') or '(not created yet)'} {f['work_order_status']}"
    if "sensor" in f:
        if f.get("value") is None:
            return f"{f['sensor']} unavailable"
        quality = "live" if f.get("source") == "live" else f"from cache, {f.get('age_s')} s old"
        flag = ", outlier" if f.get("is_outlier") else f", {f['alarm']} alarm" if f.get("alarm") else ""
        return f"{f['sensor']} {f['value']} {f.get('unit', '')} ({quality}{flag})"
    if f.get("fault_code") and f.get("title"):
        page = f", p. {f['page']}" if f.get("page") is not None else ""
        return f"{f['fault_code']} {f['title']}{page}"
    return None
