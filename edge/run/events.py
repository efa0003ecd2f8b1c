"""Run events: what a run tells whoever watches it, one model per kind, told apart by `type`.

The loop emits them as it goes; the service adds `stored` (the record is saved) or `error`, numbers
them from 0 and streams them as server-sent events; a stored run replays as the same sequence
(`events_from_record`), so a tablet that missed a run, or part of one, is shown it the same way.

    run_started, then per step: format_error | thought, answer_rejected | thought, action, observation;
    a warning when the run goes on with the rules planner; final_answer, termination; stored | error
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from edge.run.record import COMPOSER, FALLBACK_SEPARATOR, RejectedAnswer, RunRecord, Step, Termination
from edge.run.store import work_order_ref
from tools.observation import Observation


class _Event(BaseModel):
    # Every field is always sent, so every field is required in what a client reads.
    model_config = ConfigDict(frozen=True, json_schema_serialization_defaults_required=True)

    type: str
    run_id: str


class RunStartedEvent(_Event):
    type: Literal["run_started"] = "run_started"
    question: str
    device_id: str | None
    planner: str
    degraded: bool


class FormatErrorEvent(_Event):
    """The model's reply could not be read; it is told why and asked again."""

    type: Literal["format_error"] = "format_error"
    step: int
    # The planner that took the step: "llm" or "rules" (the tablet and the CLI show it).
    planner: str
    error: str


class ThoughtEvent(_Event):
    type: Literal["thought"] = "thought"
    step: int
    planner: str
    text: str


class AnswerRejectedEvent(_Event):
    """A final answer that failed verification: not shown, kept in the record."""

    type: Literal["answer_rejected"] = "answer_rejected"
    step: int
    problems: list[str]


class ActionEvent(_Event):
    type: Literal["action"] = "action"
    step: int
    planner: str
    tool: str
    args: Any


class ObservationEvent(_Event):
    type: Literal["observation"] = "observation"
    step: int
    observation: Observation


class WarningEvent(_Event):
    """The run goes on in degraded mode with the rules planner, and why."""

    type: Literal["warning"] = "warning"
    text: str


class FinalAnswerEvent(_Event):
    type: Literal["final_answer"] = "final_answer"
    text: str


class TerminationEvent(_Event):
    type: Literal["termination"] = "termination"
    termination: Termination


class StoredEvent(_Event):
    """The record is saved: `GET /v1/runs/{run_id}` has it from here on. The last event of a run."""

    type: Literal["stored"] = "stored"
    # The work order the run proposed or touched, with the step that did: what the app's card shows.
    work_order: dict[str, Any] | None


class ErrorEvent(_Event):
    """The run failed and left no record. The last event of a run."""

    type: Literal["error"] = "error"
    error: str


RunEvent = Annotated[
    RunStartedEvent
    | FormatErrorEvent
    | ThoughtEvent
    | AnswerRejectedEvent
    | ActionEvent
    | ObservationEvent
    | WarningEvent
    | FinalAnswerEvent
    | TerminationEvent
    | StoredEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
RUN_EVENT = TypeAdapter(RunEvent)
# After one of these a run has nothing more to say.
LAST_EVENTS = (StoredEvent, ErrorEvent)


def stored_event(record: RunRecord) -> StoredEvent:
    ref = work_order_ref(record)
    return StoredEvent(run_id=record.run_id, work_order={**ref[1], "step": ref[0].n} if ref else None)


def events_from_record(record: RunRecord) -> list[RunEvent]:
    """A stored run as the events it streamed, in the same order, ending with `stored`.

    The record keeps no event list, so where the one warning goes is worked out: the run went on with
    the rules planner just before that planner's first step (or its answer, if it planned no step).
    Observations are as the record has them: `truncated` is set there if a later prompt cut one."""
    run_id = record.run_id
    first_planner = record.planner.split(FALLBACK_SEPARATOR)[0]
    # A run that fell back started undegraded: only the fallback made it so.
    events: list[RunEvent] = [
        RunStartedEvent(
            run_id=run_id,
            question=record.question,
            device_id=record.device_id,
            planner=first_planner,
            degraded=record.degraded and not record.fallback,
        )
    ]
    # Answers composed at the end are checked in silence; the others were announced.
    rejected = {r.step: r for r in record.rejected_answers if r.planner != COMPOSER}
    # Rejections are warnings in the record but `answer_rejected` events in the stream.
    pending = [
        WarningEvent(run_id=run_id, text=text)
        for text in record.warnings
        if text not in {r.warning for r in rejected.values()}
    ]
    for step in record.steps:
        if step.planner != first_planner:
            events += pending
            pending = []
        events += _step_events(run_id, step, rejected.get(step.n))
    events += pending
    if record.termination is not None:
        events += [
            FinalAnswerEvent(run_id=run_id, text=record.termination.final_answer),
            TerminationEvent(run_id=run_id, termination=record.termination),
        ]
    return [*events, stored_event(record)]


def _step_events(run_id: str, step: Step, rejected: RejectedAnswer | None) -> list[RunEvent]:
    if step.format_error:
        return [FormatErrorEvent(run_id=run_id, step=step.n, planner=step.planner, error=step.format_error)]
    events: list[RunEvent] = []
    if step.thought:
        events.append(ThoughtEvent(run_id=run_id, step=step.n, planner=step.planner, text=step.thought))
    if step.final_answer is not None and rejected is not None:
        events.append(AnswerRejectedEvent(run_id=run_id, step=step.n, problems=rejected.problems))
    if step.action:
        events.append(ActionEvent(run_id=run_id, step=step.n, planner=step.planner, tool=step.action, args=step.args))
    if step.observation is not None:
        events.append(ObservationEvent(run_id=run_id, step=step.n, observation=step.observation))
    return events
