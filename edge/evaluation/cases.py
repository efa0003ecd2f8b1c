"""An evaluation case: a question, where it is asked, what to break first, and what a good run does.

Cases are JSON Lines, one object per line; a line that does not fit names its
line number and the field that is wrong. Expectations left out are not scored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from edge.run import TOOL_NAMES, TerminationReason
from tools import plant
from tools.plant import DeviceConfig

# created: a new order id in the answer; existing: an open order returned, no duplicate;
# pending: proposed and waiting for the technician; none: nothing ordered.
WorkOrderOutcome = Literal["created", "existing", "pending", "none"]
# live: a Good live value; cache_fallback: the PLC was silent and the cache answered;
# outlier: a value outside the plausible range (a broken sensor); unavailable: no usable value.
ReadingKind = Literal["live", "cache_fallback", "outlier", "unavailable"]


def _a_tool(name: str) -> str:
    if name not in TOOL_NAMES:
        raise ValueError(f"no tool is called {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    return name


ToolName = Annotated[str, AfterValidator(_a_tool)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Fault(Strict):
    """Something broken in the plant before the case's question is asked; cleared after it."""

    kind: Literal["broken_sensor", "plc_outage"]
    device_id: str
    # broken_sensor: which sensor, and the value it is stuck at (default: far above its plausible range).
    sensor: str | None = None
    value: float | None = None

    @model_validator(mode="after")
    def _sensor_for_broken(self) -> Fault:
        if self.kind == "broken_sensor" and not self.sensor:
            raise ValueError("a broken_sensor fault needs 'sensor'")
        if self.kind == "plc_outage" and (self.sensor or self.value is not None):
            raise ValueError("a plc_outage fault takes the whole device down: leave out 'sensor' and 'value'")
        return self


class Expect(Strict):
    first_tool: ToolName | None = None
    # Exactly the set of tools the run calls.
    tools: list[ToolName] | None = None
    # Each must be found by the manual tool and named in the answer.
    fault_codes: list[str] = Field(default_factory=list)
    # Each must be read from the PLC and named in the answer.
    sensors: list[str] = Field(default_factory=list)
    reading: ReadingKind | None = None
    # ok: the manual tool found an entry; not_found: it said there is none.
    manual: Literal["ok", "not_found"] | None = None
    work_order: WorkOrderOutcome | None = None
    termination: TerminationReason | None = "final_answer"
    # Default: the language of the question.
    language: Literal["en", "zh"] | None = None


class EvalCase(Strict):
    id: str = Field(min_length=1, max_length=80, pattern=r"^[a-z0-9][a-z0-9._-]*$")
    question: str = Field(min_length=1)
    device_id: str | None = None
    # technician: the tablet flow, where a new work order waits for confirmation (demo config).
    actor: Literal["technician", "mes", "operator"] = "technician"
    # Earlier questions of the same session, asked first in order; only the last run is scored.
    session: list[str] = Field(default_factory=list)
    fault: Fault | None = None
    alarm: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)


class CaseFileError(ValueError):
    """A case file that cannot be run, phrased for whoever edits it."""


def load_cases(path: str | Path, devices: dict[str, DeviceConfig] | None = None) -> list[EvalCase]:
    """Read and check a JSONL case file; with `devices`, every device and sensor named must exist."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CaseFileError(f"case file not found: {path}") from None
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        where = f"{path}:{number}"
        try:
            case = EvalCase.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CaseFileError(f"{where}: not valid JSON: {exc.msg} at column {exc.colno}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(part) for part in first["loc"]) or "(case)"
            raise CaseFileError(f"{where}: {field}: {first['msg']}") from None
        if case.id in seen:
            raise CaseFileError(f"{where}: case id {case.id!r} is used twice")
        seen.add(case.id)
        if devices is not None:
            problem = _plant_problem(case, devices)
            if problem:
                raise CaseFileError(f"{where} ({case.id}): {problem}")
        cases.append(case)
    if not cases:
        raise CaseFileError(f"{path} holds no cases")
    return cases


def _plant_problem(case: EvalCase, devices: dict[str, DeviceConfig]) -> str | None:
    named = [case.device_id] if case.device_id else []
    if case.fault:
        named.append(case.fault.device_id)
    try:
        for device_id in named:
            plant.require(devices, device_id)
    except plant.UnknownDevice as exc:
        return str(exc)
    if case.fault and case.fault.sensor and case.fault.sensor not in devices[case.fault.device_id].sensors:
        return f"device {case.fault.device_id!r} has no sensor {case.fault.sensor!r}"
    all_sensors = {sensor for device in devices.values() for sensor in device.sensors}
    for sensor in case.expect.sensors:
        if sensor not in all_sensors:
            return f"expect.sensors: no device has a sensor {sensor!r}"
    return None
