"""A finished run as spans: the run, a child per step, and under a step its LLM request and its tool call.

The record keeps the run's start and each part's duration, not each part's start: a step starts where the one
before it ended, its LLM request when the step starts, its tool call when the planner is done. GenAI semantic
convention names (`gen_ai.*`) where one exists, `fixloop.*` for the rest. Text the technician or the model wrote
(question, answer, thoughts, tool arguments) only with `include_text`.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from edge.config import LlmConfig
from edge.run.phrases import language_of
from edge.run.record import FALLBACK_SEPARATOR, LlmUsage, RunRecord, Step
from tools.observation import Observation

_NS_PER_MS = 1_000_000


def write_run(tracer: Tracer, record: RunRecord, include_text: bool, llm: LlmConfig) -> None:
    start = record.started_ms * _NS_PER_MS
    end = start + _ns(record.elapsed_ms)
    run = tracer.start_span("fixloop.run", start_time=start, attributes=_run_attributes(record, include_text))
    rejected = {answer.step for answer in record.rejected_answers}
    cursor = start
    for step in record.steps:
        step_end = min(cursor + _ns(step.step_ms), end)
        span = tracer.start_span(
            "fixloop.step",
            context=trace.set_span_in_context(run),
            start_time=cursor,
            attributes=_step_attributes(step, step.n in rejected, include_text),
        )
        inside = trace.set_span_in_context(span)
        if step.llm is not None:
            _write_llm_request(tracer, inside, step.llm, cursor, min(cursor + _ns(step.llm.latency_ms), step_end), llm)
        if step.observation is not None:
            tool_start = min(cursor + _ns(step.planner_ms), step_end)
            tool_end = min(tool_start + _ns(step.tool_ms), step_end)
            _write_tool_call(tracer, inside, step, step.observation, tool_start, tool_end, include_text)
        span.end(end_time=step_end)
        cursor = step_end
    run.end(end_time=end)


def _run_attributes(record: RunRecord, include_text: bool) -> dict[str, Any]:
    termination = record.termination
    llm_steps = [step.llm for step in record.steps if step.llm is not None]
    return _present(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "fixloop",
            "fixloop.run.id": record.run_id,
            "fixloop.request.id": record.request_id,
            "fixloop.session.id": record.session_id,
            "fixloop.actor": record.actor,
            "fixloop.device.id": record.device_id,
            "fixloop.question.language": language_of(record.question),
            "fixloop.planner": record.planner,
            "fixloop.planners": record.planner.split(FALLBACK_SEPARATOR),
            "fixloop.degraded": record.degraded,
            "fixloop.fallback.reason": record.fallback,
            "fixloop.termination.reason": termination.reason if termination else None,
            "fixloop.confidence": termination.confidence if termination else None,
            "fixloop.steps": len(record.steps),
            "fixloop.answers_rejected": len(record.rejected_answers),
            "fixloop.warnings": len(record.warnings),
            "gen_ai.usage.input_tokens": record.prompt_tokens if llm_steps else None,
            "gen_ai.usage.output_tokens": record.completion_tokens if llm_steps else None,
            "fixloop.question": record.question if include_text else None,
            "fixloop.answer": termination.final_answer if include_text and termination else None,
        }
    )


def _step_attributes(step: Step, rejected: bool, include_text: bool) -> dict[str, Any]:
    if step.format_error is not None:
        kind = "format_error"
    elif step.final_answer is not None:
        kind = "final_answer"
    else:
        kind = "tool_call"
    return _present(
        {
            "fixloop.step.n": step.n,
            "fixloop.step.kind": kind,
            "fixloop.step.planner": step.planner,
            "fixloop.step.tool": step.action,
            "fixloop.step.answer_rejected": rejected or None,
            "fixloop.step.planner_ms": round(step.planner_ms, 3),
            "fixloop.step.thought": step.thought if include_text and step.thought else None,
            "fixloop.step.final_answer": step.final_answer if include_text else None,
            "fixloop.step.format_error": step.format_error if include_text else None,
        }
    )


def _write_llm_request(tracer: Tracer, parent: Context, usage: LlmUsage, start: int, end: int, llm: LlmConfig) -> None:
    server = urlsplit(llm.url) if llm.url else None
    attributes = _present(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": llm.model,
            "gen_ai.response.model": usage.model,
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
            # Only the server's own figure: the shared-prefix estimate is not what the cache reused.
            "gen_ai.usage.cache_read.input_tokens": usage.cached_tokens,
            "gen_ai.response.finish_reasons": [usage.finish_reason] if usage.finish_reason else None,
            "server.address": server.hostname if server else None,
            "server.port": server.port if server else None,
            "fixloop.llm.tokens_estimated": usage.estimated,
            "fixloop.llm.shared_prefix_tokens": usage.shared_prefix_tokens,
            "fixloop.llm.prompt_ms": usage.prompt_ms,
            "fixloop.llm.generation_ms": usage.generation_ms,
        }
    )
    span = tracer.start_span(
        f"chat {llm.model}", context=parent, kind=SpanKind.CLIENT, start_time=start, attributes=attributes
    )
    span.end(end_time=end)


def _write_tool_call(
    tracer: Tracer,
    parent: Context,
    step: Step,
    observation: Observation,
    start: int,
    end: int,
    include_text: bool,
) -> None:
    attributes = _present(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": observation.tool,
            "gen_ai.tool.call.id": observation.id,
            "gen_ai.tool.call.arguments": json.dumps(step.args, ensure_ascii=False) if include_text else None,
            "fixloop.tool.status": observation.status,
            "fixloop.tool.source": observation.source or None,
            "fixloop.tool.latency_ms": round(observation.elapsed_ms, 3),
            "fixloop.tool.confidence": observation.confidence,
            "fixloop.tool.error_code": observation.error_code,
            "fixloop.tool.no_new_information": observation.no_new_information or None,
        }
    )
    span = tracer.start_span(
        f"execute_tool {observation.tool}", context=parent, start_time=start, attributes=attributes
    )
    if observation.status == "error":
        span.set_status(Status(StatusCode.ERROR, observation.error_code))
    span.end(end_time=end)


def _ns(ms: float) -> int:
    return round(ms * _NS_PER_MS)


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    """OpenTelemetry attributes cannot be None: an absent value is an absent attribute."""
    return {key: value for key, value in attributes.items() if value is not None}
