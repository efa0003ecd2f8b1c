"""Scoring one case's run against its expectations.

Each metric is True, False, or None when the case does not ask about it.
`problems` says in words what failed, for the person reading the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from edge.evaluation.cases import EvalCase, ReadingKind
from edge.run import Evidence, RunRecord, collect_evidence, language_of, ungrounded
from knowledge.code_linker import CodeLinker
from knowledge.codes import canonical_id, code_key
from tools.manual_search.tool import ManualSearchTool
from tools.observation import Observation
from tools.plant import DeviceConfig
from tools.plc.tool import PlcReadTool
from tools.work_orders.tool import WorkOrderTool

_MANUAL = ManualSearchTool.name
_PLC = PlcReadTool.name
_WORK_ORDER = WorkOrderTool.name

# Summary order; `passed` is all applicable metrics of a case at once.
METRICS = (
    "first_tool",
    "tool_set",
    "fault_code",
    "sensor",
    "manual",
    "work_order",
    "grounded",
    "termination",
    "language",
    "passed",
)


class CaseScore(BaseModel):
    first_tool: bool | None = None
    tool_set: bool | None = None
    fault_code: bool | None = None
    sensor: bool | None = None
    manual: bool | None = None
    work_order: bool | None = None
    grounded: bool
    termination: bool | None = None
    language: bool
    passed: bool = False
    problems: list[str] = Field(default_factory=list)
    ungrounded: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    steps: int = 0
    tokens: int = 0
    context_tokens: int = 0
    latency_ms: float = 0.0
    planner: str = ""


def score_case(
    case: EvalCase, record: RunRecord, devices: dict[str, DeviceConfig], earlier: Sequence[RunRecord] = ()
) -> CaseScore:
    expect = case.expect
    answer = record.termination.final_answer if record.termination else ""
    observations = record.observations
    tools = [obs.tool for obs in observations]
    problems: list[str] = []

    def check(name: str, ok: bool, why: str) -> bool:
        if not ok:
            problems.append(f"{name}: {why}")
        return ok

    score: dict[str, Any] = {}
    if expect.first_tool is not None:
        first = tools[0] if tools else None
        score["first_tool"] = check(
            "first_tool", first == expect.first_tool, f"expected {expect.first_tool}, got {first}"
        )
    if expect.tools is not None:
        score["tool_set"] = check(
            "tool_set",
            set(tools) == set(expect.tools),
            f"expected {sorted(set(expect.tools))}, got {sorted(set(tools))}",
        )
    if expect.fault_codes:
        missing = _missing_codes(expect.fault_codes, observations, answer)
        score["fault_code"] = check("fault_code", not missing, "; ".join(missing))
    if expect.sensors:
        missing = _missing_sensors(expect.sensors, expect.reading, observations, answer, devices)
        score["sensor"] = check("sensor", not missing, "; ".join(missing))
    if expect.manual is not None:
        statuses = [obs.status for obs in observations if obs.tool == _MANUAL]
        got = statuses[0] if statuses else "not called"
        score["manual"] = check("manual", got == expect.manual, f"expected {expect.manual}, got {got}")
    if expect.work_order is not None:
        outcome = _work_order_outcome(observations, answer)
        score["work_order"] = check(
            "work_order", outcome == expect.work_order, f"expected {expect.work_order}, got {outcome}"
        )
    evidence = _run_evidence(record, devices, earlier)
    # The loop shows no answer that fails the check; an answer it rejected still counts against the
    # planner that wrote it, so the evaluation judges the model, not only what the technician read.
    unbacked = list(
        dict.fromkeys(
            [
                *ungrounded(answer, evidence),
                *(fact for rejected in record.rejected_answers for fact in ungrounded(rejected.text, evidence)),
            ]
        )
    )
    score["grounded"] = check("grounded", not unbacked, "not in any observation: " + ", ".join(unbacked))
    reason = record.termination.reason if record.termination else None
    if expect.termination is not None:
        score["termination"] = check(
            "termination", reason == expect.termination, f"expected {expect.termination}, got {reason}"
        )
    expected_language = expect.language or language_of(case.question)
    score["language"] = check(
        "language", language_of(answer) == expected_language, f"expected {expected_language}, got {language_of(answer)}"
    )
    applicable = [value for value in score.values() if value is not None]
    return CaseScore(
        **score,
        passed=all(applicable),
        problems=problems,
        ungrounded=unbacked,
        tools=tools,
        steps=len(record.steps),
        tokens=record.prompt_tokens + record.completion_tokens,
        context_tokens=record.context_tokens,
        latency_ms=round(record.elapsed_ms, 1),
        planner=record.planner,
    )


def crashed_score(case: EvalCase, error: str) -> CaseScore:
    """A run that raised fails every metric its case asks about."""
    expect = case.expect
    asked = {
        "first_tool": expect.first_tool is not None,
        "tool_set": expect.tools is not None,
        "fault_code": bool(expect.fault_codes),
        "sensor": bool(expect.sensors),
        "manual": expect.manual is not None,
        "work_order": expect.work_order is not None,
        "termination": expect.termination is not None,
    }
    failed: dict[str, Any] = {name: False for name, on in asked.items() if on}
    return CaseScore(**failed, grounded=False, language=False, passed=False, problems=[f"run failed: {error}"])


def _run_evidence(record: RunRecord, devices: dict[str, DeviceConfig], earlier: Sequence[RunRecord] = ()) -> Evidence:
    """What an answer may draw on: this run's observations and question, earlier runs of its session, the plant."""
    observations = [obs for run in [*earlier, record] for obs in run.observations]
    return collect_evidence(observations, record.question, devices, [run.question for run in earlier])


def _work_order_outcome(observations: list[Observation], answer: str) -> str:
    outcome = "none"
    for obs in observations:
        if obs.tool != _WORK_ORDER or obs.status != "ok":
            continue
        for item in obs.content:
            f = item.fields
            if f.get("work_order_status") == "pending_confirmation":
                outcome = "pending"
            elif f.get("work_order_id"):
                named = str(f["work_order_id"]).upper() in answer.upper()
                outcome = ("created" if f.get("created") else "existing") if named else "not named in the answer"
    return outcome


def _missing_codes(expected: list[str], observations: list[Observation], answer: str) -> list[str]:
    found = {
        canonical_id(str(item.fields["fault_code"]))
        for obs in observations
        if obs.tool == _MANUAL and obs.status in ("ok", "degraded")
        for item in obs.content
        if item.kind == "ref" and item.fields.get("fault_code")
    }
    bare = [code_key(code) for code in expected if code_key(code).isdigit()]
    named = {mention.canonical_id for mention in CodeLinker(bare).mentions(answer, language_of(answer))}
    missing = []
    for code in expected:
        if canonical_id(code) not in found:
            missing.append(f"{code} not returned by the manual tool")
        elif canonical_id(code) not in named:
            missing.append(f"{code} not named in the answer")
    return missing


def _missing_sensors(
    expected: list[str],
    reading: ReadingKind | None,
    observations: list[Observation],
    answer: str,
    devices: dict[str, DeviceConfig],
) -> list[str]:
    readings = {
        item.fields["sensor"]: item.fields
        for obs in observations
        if obs.tool == _PLC
        for item in obs.content
        if item.kind == "ref" and item.fields.get("sensor")
    }
    missing = []
    for sensor in expected:
        fields = readings.get(sensor)
        if fields is None:
            missing.append(f"{sensor} not read")
            continue
        if reading is not None and _reading_kind(fields) != reading:
            missing.append(f"{sensor}: expected a {reading} reading, got {_reading_kind(fields)}")
        names = {sensor, sensor.replace("_", " ")}
        for device in devices.values():
            if sensor in device.sensors:
                config = device.sensors[sensor]
                names.update({config.label, config.label_zh, *config.synonyms})
        if not any(name and name.lower() in answer.lower() for name in names):
            missing.append(f"{sensor} not named in the answer")
    return missing


def _reading_kind(fields: dict[str, Any]) -> ReadingKind:
    if fields.get("value") is None:
        return "unavailable"
    if fields.get("is_outlier"):
        return "outlier"
    return "live" if fields.get("source") == "live" else "cache_fallback"
