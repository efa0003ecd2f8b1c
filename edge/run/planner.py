"""What a planner sees and what it decides, shared by the LLM and the rules planner."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from edge.run.actions import Action
from edge.run.record import FallbackReason, LlmUsage, Step
from tools.observation import Observation


class LlmUnavailable(RuntimeError):
    """The server could not be reached, timed out or failed: switch to the rules planner."""


class LlmOutOfTime(LlmUnavailable):
    """The run's own deadline ended the request (waiting for the server's turn behind other runs, or cut
    shorter than the request timeout): nothing is known about the server."""


class LlmCircuitOpen(LlmUnavailable):
    """The LLM breaker is open: no request was sent."""


class ContextFull(LlmUnavailable):
    """The next request's prompt and reply would not fit the model's context: no request was sent (a
    server refuses it, and a small context fills within a run)."""


@dataclass
class SessionContext:
    """A rule-built summary of earlier runs in the same session, not their whole log."""

    device_id: str | None = None
    fault_codes: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    # The sensors the latest run read on `device_id`: what "is that normal?" or "the other one" points at.
    sensors: list[str] = field(default_factory=list)
    # Codes a manual search of the session listed for `device_id`: a follow-up may open an order on them.
    listed_codes: list[str] = field(default_factory=list)


@dataclass
class RunState:
    question: str
    device_id: str | None
    session: SessionContext
    actor: str
    # Tablet flow with confirmation required: a known fault on a known device gets an order proposal.
    propose_work_order: bool = False
    # An MES alarm run: the device and fault code come from the alarm, never from parsing its text.
    alarm: dict[str, Any] | None = None
    steps: list[Step] = field(default_factory=list)
    # Planner-private memory for this run (the planners themselves are shared across runs).
    scratch: dict[str, Any] = field(default_factory=dict)
    # time.monotonic() at which the run's wall budget ends: no request may outlive it.
    deadline: float = float("inf")

    @property
    def observations(self) -> list[Observation]:
        return [step.observation for step in self.steps if step.observation is not None]

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class Decision:
    action: Action | None
    format_error: str | None = None
    raw: str | None = None
    usage: LlmUsage | None = None
    # The reply was empty: no point asking again, the loop hands the run to the rules planner.
    empty: bool = False
    # Which stage decided ("rules" or "model") and why, for the record's trace; the loop fills in the
    # planner's own stage when a planner does not say.
    decided_by: str | None = None
    why: str = ""
    # Set when the rules take every step because the model plans worse than them: why (the mode line).
    prose_only: str | None = None
    # Set when this decision ends the model's part of the run: the loop hands the rest to the rules planner.
    hand_over: FallbackReason | None = None


class Planner(Protocol):
    name: str
    # Whether its answers are degraded ones (no language model), said in the record and the answer.
    degraded: bool

    def decide(self, state: RunState) -> Decision: ...
