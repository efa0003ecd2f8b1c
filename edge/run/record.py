"""The run record: everything a run did, in order, and why it stopped."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from edge.run.document import AnswerDocument
from tools.observation import Observation

# Why a run went on with the rules planner (the answer then says it is degraded).
FallbackReason = Literal[
    "llm_unavailable",  # the server failed, timed out or missed the run's deadline
    "circuit_open",  # the LLM breaker is open: no request was sent
    "llm_out_of_time",  # the run's time ran out waiting for the server's turn or its reply: no verdict on it
    "format_errors",  # too many unreadable replies in a row
    "empty_reply",  # the model replied with nothing
    "unknown_tool",  # the model asked for a tool that does not exist, twice
    "answer_rejected",  # the model's final answer failed verification
    "guess_unusable",  # rules first: the model's one guess at a step was refused or unreadable
    "token_budget",  # the LLM used up the run's tokens (the rules planner uses none)
    "repeated_calls",  # the model repeated a call or kept getting the same result: handed over
    "max_steps",  # the model used up the steps without an answer: handed over
    "time_budget",  # the model used up the run's time without an answer: handed over
]

TerminationReason = Literal[
    "final_answer",  # strong: the planner answered
    "repeated_action",  # weak: same call with the same arguments twice in a row
    "repeated_observation",  # weak: the same observation twice in a row
    "repeated_call_limit",  # weak: the same call three times in one run
    "format_errors",  # older records: the model could not produce a readable step (now: rules fallback)
    "max_steps",  # budget
    "token_budget",  # older records: tokens ran out (now: rules fallback)
    "time_budget",  # budget
    "takeover",  # a technician took over
]


class LlmUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Tokens of this request's prompt that repeat the previous request's prompt verbatim
    # (what vLLM's prefix cache can reuse); `cached_tokens` is the server's own figure when it reports one.
    shared_prefix_tokens: int = 0
    cached_tokens: int | None = None
    latency_ms: float = 0.0
    # The server sent no usage: the counts are `edge.llm.tokens`'s conservative estimate.
    estimated: bool = False
    finish_reason: str | None = None
    # The server's split of the latency into prompt processing and generation, where it reports one.
    prompt_ms: float | None = None
    generation_ms: float | None = None
    # The model that answered, as the server names it.
    model: str | None = None


class Step(BaseModel):
    n: int
    planner: str
    # The stage that decided this step ("rules": a trigger rule was certain; "model") and why.
    decided_by: str = ""
    why: str = ""
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
    # The answer as a typed document (`edge.run.document`); `final_answer` is its plain-text rendering.
    # None in records from before it was stored.
    answer: AnswerDocument | None = None


# Between the planners of `RunRecord.planner` when a run fell back: "llm->rules".
FALLBACK_SEPARATOR = "->"
# `RejectedAnswer.planner` of an answer composed from the observations at the end of a run.
COMPOSER = "composer"


class RejectedAnswer(BaseModel):
    """A final answer that was not shown because it failed verification (kept for review)."""

    step: int
    planner: str
    text: str
    problems: list[str]

    @property
    def warning(self) -> str:
        """How the record's warnings say it (the stream says it as an `answer_rejected` event)."""
        return f"Final answer of step {self.step} not shown: {'; '.join(self.problems)}."


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
    fallback: FallbackReason | None = None
    rejected_answers: list[RejectedAnswer] = Field(default_factory=list)
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


CUT_MARKER = " […]"


def cap_text(text: str, max_chars: int) -> str:
    """At most `max_chars` characters, cut at a line or word boundary where there is one, and marked."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars - len(CUT_MARKER)]
    for boundary in ("\n", " "):
        at = head.rfind(boundary)
        if at >= len(head) // 2:
            head = head[:at]
            break
    return head.rstrip() + CUT_MARKER
