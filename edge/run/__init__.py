"""One run, from question to answer: the loop, what a planner sees and decides (`planner`, `actions`), the
answer as a typed document (`document`) built by code from the observations (`compose`, `verdicts`), a
planner's prose checked sentence by sentence (`prose`, `claims`, `trust`) and rendered as text (`render`,
`phrases`), the checks an answer must pass (`verification`, `grounding`, `sentence_support`), the run's
record and its store, the events the tablet streams, and the session summary a follow-up starts from.

The names below are the package's API, each imported from its module on first use. The run never imports a
planner: the rules planner (`edge.rules`) and the language model (`edge.llm`) plug into it from above.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from edge.run.actions import FinalAnswer, FormatError, ToolCall, action_of, decode_object, strip_stop_residue
    from edge.run.compose import build_document, supporting_ids
    from edge.run.document import AnswerDocument
    from edge.run.events import LAST_EVENTS, RUN_EVENT, ErrorEvent, RunEvent, events_from_record, stored_event
    from edge.run.grounding import TOOL_NAMES, Evidence, collect_evidence, ungrounded
    from edge.run.loop import AgentLoop, EventSink, RunRequest, evidence_of, new_id
    from edge.run.phrases import PHRASES, language_of
    from edge.run.planner import (
        ContextFull,
        Decision,
        LlmCircuitOpen,
        LlmOutOfTime,
        LlmUnavailable,
        Planner,
        RunState,
        SessionContext,
    )
    from edge.run.prose import refusal_kind
    from edge.run.record import LlmUsage, RunRecord, TerminationReason, cap_text
    from edge.run.render import render_text
    from edge.run.sentence_support import UNSUPPORTED
    from edge.run.sessions import listed_codes, session_context
    from edge.run.store import (
        WORK_ORDER_TOOL,
        Confirmation,
        Feedback,
        FeedbackFilter,
        FeedbackRow,
        RunFilter,
        RunStore,
        RunSummary,
        work_order_ref,
    )
    from edge.run.verdicts import asks_if_safe
    from edge.run.verification import AnswerVerifier

_EXPORTS = {
    "AgentLoop": "edge.run.loop",
    "AnswerDocument": "edge.run.document",
    "AnswerVerifier": "edge.run.verification",
    "Confirmation": "edge.run.store",
    "ContextFull": "edge.run.planner",
    "Decision": "edge.run.planner",
    "ErrorEvent": "edge.run.events",
    "EventSink": "edge.run.loop",
    "Evidence": "edge.run.grounding",
    "TOOL_NAMES": "edge.run.grounding",
    "Feedback": "edge.run.store",
    "FeedbackFilter": "edge.run.store",
    "FeedbackRow": "edge.run.store",
    "FinalAnswer": "edge.run.actions",
    "FormatError": "edge.run.actions",
    "LAST_EVENTS": "edge.run.events",
    "LlmCircuitOpen": "edge.run.planner",
    "LlmOutOfTime": "edge.run.planner",
    "LlmUnavailable": "edge.run.planner",
    "LlmUsage": "edge.run.record",
    "PHRASES": "edge.run.phrases",
    "Planner": "edge.run.planner",
    "RUN_EVENT": "edge.run.events",
    "RunEvent": "edge.run.events",
    "RunFilter": "edge.run.store",
    "RunRecord": "edge.run.record",
    "RunRequest": "edge.run.loop",
    "RunState": "edge.run.planner",
    "RunStore": "edge.run.store",
    "RunSummary": "edge.run.store",
    "SessionContext": "edge.run.planner",
    "TerminationReason": "edge.run.record",
    "ToolCall": "edge.run.actions",
    "UNSUPPORTED": "edge.run.sentence_support",
    "WORK_ORDER_TOOL": "edge.run.store",
    "action_of": "edge.run.actions",
    "asks_if_safe": "edge.run.verdicts",
    "cap_text": "edge.run.record",
    "collect_evidence": "edge.run.grounding",
    "device_of": "edge.run.store",
    "build_document": "edge.run.compose",
    "render_text": "edge.run.render",
    "refusal_kind": "edge.run.prose",
    "decode_object": "edge.run.actions",
    "events_from_record": "edge.run.events",
    "evidence_of": "edge.run.loop",
    "fault_codes_of": "edge.run.store",
    "language_of": "edge.run.phrases",
    "listed_codes": "edge.run.sessions",
    "new_id": "edge.run.loop",
    "session_context": "edge.run.sessions",
    "stored_event": "edge.run.events",
    "strip_stop_residue": "edge.run.actions",
    "supporting_ids": "edge.run.compose",
    "ungrounded": "edge.run.grounding",
    "work_order_ref": "edge.run.store",
}

__all__ = [
    "LAST_EVENTS",
    "PHRASES",
    "RUN_EVENT",
    "TOOL_NAMES",
    "UNSUPPORTED",
    "WORK_ORDER_TOOL",
    "AgentLoop",
    "AnswerDocument",
    "AnswerVerifier",
    "Confirmation",
    "ContextFull",
    "Decision",
    "ErrorEvent",
    "EventSink",
    "Evidence",
    "Feedback",
    "FeedbackFilter",
    "FeedbackRow",
    "FinalAnswer",
    "FormatError",
    "LlmCircuitOpen",
    "LlmOutOfTime",
    "LlmUnavailable",
    "LlmUsage",
    "Planner",
    "RunEvent",
    "RunFilter",
    "RunRecord",
    "RunRequest",
    "RunState",
    "RunStore",
    "RunSummary",
    "SessionContext",
    "TerminationReason",
    "ToolCall",
    "action_of",
    "asks_if_safe",
    "build_document",
    "cap_text",
    "collect_evidence",
    "decode_object",
    "device_of",
    "events_from_record",
    "evidence_of",
    "fault_codes_of",
    "language_of",
    "listed_codes",
    "new_id",
    "refusal_kind",
    "render_text",
    "session_context",
    "stored_event",
    "strip_stop_residue",
    "supporting_ids",
    "ungrounded",
    "work_order_ref",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
