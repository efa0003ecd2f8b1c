"""The routing probe: a few questions whose first tool is known, put to the model and to the rules.

A model that picks the wrong first tool where the rules pick the right one plans worse than the rules;
then it should write only the prose (`RulesFirstPlanner.mode = "prose"`). The questions are made from
the plant's own config (its devices, sensor labels and the codes its manuals list), so the probe works
on any plant; `fixloop doctor` prints it and the service runs it before it says ready.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from edge.llm.planner import LlmPlanner
from edge.rules.planner import RulesPlanner
from edge.run import RunState, SessionContext, ToolCall
from tools.manual_search.tool import ManualSearchTool
from tools.plant import DeviceConfig
from tools.plc.tool import PlcReadTool

__all__ = ["ProbeCase", "RoutingResult", "probe_cases", "routing_probe"]

_MANUAL = ManualSearchTool.name
_PLC = PlcReadTool.name
_CODES = 2
_DEVICES = 2


@dataclass(frozen=True)
class ProbeCase:
    question: str
    device_id: str
    first_tool: str


@dataclass
class RoutingResult:
    total: int
    model_agreed: int
    rules_agreed: int
    # "question: expected X, the model chose Y", for each case the model got wrong.
    misses: list[str] = field(default_factory=list)

    @property
    def worse(self) -> bool:
        return self.model_agreed < self.rules_agreed

    def summary(self) -> str:
        return f"first tool right in {self.model_agreed}/{self.total} (rules {self.rules_agreed}/{self.total})"


def probe_cases(devices: dict[str, DeviceConfig], known_codes: Iterable[str]) -> list[ProbeCase]:
    """Questions of each kind with an obvious first tool: a listed code, a named sensor now, a symptom."""
    chosen = list(devices.items())[:_DEVICES]
    cases = [
        ProbeCase(f"{chosen[0][1].name} shows {code}, what should I do?", chosen[0][0], _MANUAL)
        for code in sorted(known_codes)[:_CODES]
    ]
    for device_id, device in chosen:
        sensor = next(iter(device.sensors.values()), None)
        if sensor is not None:
            label = sensor.label or sensor.id
            cases.append(ProbeCase(f"What is the {label} of the {device.name} right now?", device_id, _PLC))
        cases.append(
            ProbeCase(f"The {device.name} makes a loud grinding noise. What can cause that?", device_id, _MANUAL)
        )
    return cases


def routing_probe(llm: LlmPlanner, rules: RulesPlanner, cases: list[ProbeCase], time_s: float) -> RoutingResult:
    """One model request per case (its first step, as if it planned alone); `LlmUnavailable` propagates."""
    result = RoutingResult(total=len(cases), model_agreed=0, rules_agreed=0)
    for case in cases:
        rules_first = _first_tool(rules.next_steps(_state(case, time_s))[:1])
        result.rules_agreed += rules_first == case.first_tool
        decision = llm.decide(_state(case, time_s))
        chosen = decision.action.tool if isinstance(decision.action, ToolCall) else None
        if chosen == case.first_tool:
            result.model_agreed += 1
        else:
            answered = chosen or ("an answer" if decision.action else "an unreadable reply")
            result.misses.append(f"{case.question!r}: expected {case.first_tool}, the model chose {answered}")
    return result


def _state(case: ProbeCase, time_s: float) -> RunState:
    return RunState(
        question=case.question,
        device_id=case.device_id,
        session=SessionContext(),
        actor="technician",
        deadline=time.monotonic() + time_s,
    )


def _first_tool(steps: list) -> str | None:
    return steps[0].call.tool if steps and steps[0].call is not None else None
