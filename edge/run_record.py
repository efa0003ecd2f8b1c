"""The run record: everything a run did, in order, and why it stopped."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.observation import Observation

TerminationReason = Literal[
    "final_answer",        # strong: the planner answered
    "repeated_action",     # weak: same call with the same arguments twice in a row
    "repeated_observation",  # weak: the same observation twice in a row
    "repeated_call_limit",   # weak: the same call three times in one run
    "format_errors",       # the model could not produce a readable step
    "max_steps",           # budget
    "token_budget",        # budget
    "time_budget",         # budget
    "takeover",            # a technician took over
]


class LlmUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Tokens of this request's prompt that repeat the previous request's prompt verbatim
    # (what vLLM's prefix cache can reuse); `cached_tokens` is the server's own figure when it reports one.
    shared_prefix_tokens: int = 0
    cached_tokens: int | None = None
    latency_ms: float = 0.0


class Step(BaseModel):
    n: int
    planner: str
    thought: str = ""
    action: str | None = None
    args: Any = None
    final_answer: str | None = None
    raw: str | None = None
    format_error: str | None = None
    observation: Observation | None = None
    llm: LlmUsage | None = None
    planner_ms: float = 0.0
    tool_ms: float = 0.0
    step_ms: float = 0.0


class Termination(BaseModel):
    reason: TerminationReason
    final_answer: str
    supporting_observations: list[str] = Field(default_factory=list)
    confidence: float = 0.0
    missing: list[str] = Field(default_factory=list)
    pending_action: dict[str, Any] | None = None


class RunRecord(BaseModel):
    run_id: str
    request_id: str
    session_id: str | None = None
    question: str
    device_id: str | None = None
    actor: str = "technician"
    # The MES alarm an alarm run handles, as received: its device and fault code bind the run's work order.
    alarm: dict[str, Any] | None = None
    planner: str
    degraded: bool = False
    warnings: list[str] = Field(default_factory=list)
    started_ms: int
    steps: list[Step] = Field(default_factory=list)
    termination: Termination | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Prompt + completions of the final context: what the token budget counts.
    context_tokens: int = 0
    elapsed_ms: float = 0.0

    @property
    def observations(self) -> list[Observation]:
        return [step.observation for step in self.steps if step.observation is not None]
