"""Prometheus series of the service and the loop, on the default registry.

The tools register their own series on the same registry (the PLC's reads
by quality and breaker state live in `tools.plc.metrics`, the trace export's
failures and dropped spans in `edge.telemetry.metrics`), so `/metrics`
shows everything from one place. Run-level series are derived from the
stored run record after each run, not counted inside the loop: what the
metrics say and what `fixloop runs` shows cannot disagree.
"""

from __future__ import annotations

import time
from collections import Counter as Tally

from prometheus_client import Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge.run import UNSUPPORTED, RunRecord, ToolCall, refusal_kind

REQUESTS = Counter(
    "fixloop_http_requests_total", "HTTP requests by endpoint and status.", ["method", "endpoint", "status"]
)
REQUEST_SECONDS = Histogram(
    "fixloop_http_request_duration_seconds",
    "Time until the response was complete (for a run stream: the whole run).",
    ["method", "endpoint"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5, 10),
)
FIRST_EVENT_SECONDS = Histogram(
    "fixloop_first_event_seconds",
    "From a run request to its first event on the stream (technicians wait ~1.5 s).",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 1.5, 2.5, 5),
)
RUNS = Counter("fixloop_runs_total", "Finished runs by actor and termination reason.", ["actor", "reason"])
ACTIVE_RUNS = Gauge("fixloop_active_runs", "Runs executing now.")
LOOP_STEPS = Histogram(
    "fixloop_loop_step",
    "Steps per run (over 5 means the prompt or a tool needs work).",
    buckets=(1, 2, 3, 4, 5, 6, 8, 10, 15),
)
RUN_SECONDS = Histogram(
    "fixloop_run_duration_seconds", "Wall time of a run.", buckets=(0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10)
)
TOOL_CALLS = Counter("fixloop_tool_calls_total", "Tool calls by tool and observation status.", ["tool", "status"])
REPEATED_CALLS = Counter(
    "fixloop_repeated_calls_total",
    "Tool calls repeating an earlier call of the same run with the same arguments.",
    ["tool"],
)
PLANNER_STEPS = Counter("fixloop_planner_steps_total", "Planner decisions by planner.", ["planner"])
FORMAT_ERRORS = Counter("fixloop_format_errors_total", "LLM replies that could not be read as an action.")
DEGRADED_RUNS = Counter("fixloop_degraded_runs_total", "Runs answered (wholly or partly) by the rules planner.")
LLM_FALLBACKS = Counter(
    "fixloop_llm_fallbacks_total",
    "Runs handed from the LLM to the rules planner, by reason (see FallbackReason).",
    ["reason"],
)
REJECTED_ANSWERS = Counter(
    "fixloop_answers_rejected_total",
    "Final answers not shown because they failed verification against the run's "
    "observations, by the planner that wrote them.",
    ["planner"],
)
UNSUPPORTED_SENTENCES = Counter(
    "fixloop_unsupported_sentences_total",
    "Sentences of rejected final answers that no observation supports (invented meanings, causes, "
    "safety claims), by the planner that wrote them.",
    ["planner"],
)
PROSE_SENTENCES_REFUSED = Counter(
    "fixloop_prose_sentences_refused_total",
    "Sentences of a planner's prose not shown, by reason: unsupported (no trusted observation says it), "
    "ungrounded (a fact no observation backs), weakens_safety, softened_wait, contradicts_verdict, "
    "claimed_action, misattributed_value (edge/run/claims.py).",
    ["reason"],
)
FEEDBACK = Counter(
    "fixloop_answer_feedback_total",
    "Technicians' feedback on answers, by whether the answer helped and whether they said what fixed it.",
    ["helpful", "fix"],
)
LLM_SECONDS = Histogram(
    "fixloop_llm_latency_seconds",
    "Latency of one LLM request.",
    buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2.5, 5),
)
LLM_TOKENS = Counter("fixloop_llm_tokens_total", "LLM tokens by kind (prompt, completion, shared_prefix).", ["kind"])
CONFIRMATIONS = Counter(
    "fixloop_work_order_confirmations_total",
    "Work orders confirmed by a technician; created=false means one was already open.",
    ["created"],
)
CONNECTIONS_DROPPED = Counter(
    "fixloop_http_connections_dropped_total",
    "Client connections closed by the server: a request head too slow "
    "(header_timeout) or the oldest waiting one past max_connections.",
    ["reason"],
)
ALARMS_REFUSED = Counter(
    "fixloop_mes_alarms_refused_total", "MES alarms answered 503 because max_concurrent_alarms were running."
)
OUTBOX_BACKLOG = Gauge("fixloop_outbox_backlog", "Outbox rows not yet delivered to the MES, by status.", ["status"])


def observe_run(record: RunRecord) -> None:
    reason = record.termination.reason if record.termination else "none"
    RUNS.labels(record.actor, reason).inc()
    LOOP_STEPS.observe(len(record.steps))
    RUN_SECONDS.observe(record.elapsed_ms / 1000)
    if record.degraded:
        DEGRADED_RUNS.inc()
    if record.fallback:
        LLM_FALLBACKS.labels(record.fallback).inc()
    for rejected in record.rejected_answers:
        REJECTED_ANSWERS.labels(rejected.planner).inc()
        UNSUPPORTED_SENTENCES.labels(rejected.planner).inc(sum(p.startswith(UNSUPPORTED) for p in rejected.problems))
    document = record.termination.answer if record.termination else None
    for sentence in document.prose.rejected if document and document.prose else ():
        for why in sentence.reasons:
            PROSE_SENTENCES_REFUSED.labels(refusal_kind(why)).inc()
    seen: Tally[str] = Tally()
    for step in record.steps:
        PLANNER_STEPS.labels(step.planner).inc()
        if step.format_error:
            FORMAT_ERRORS.inc()
        if step.llm is not None:
            LLM_SECONDS.observe(step.llm.latency_ms / 1000)
            LLM_TOKENS.labels("prompt").inc(step.llm.prompt_tokens)
            LLM_TOKENS.labels("completion").inc(step.llm.completion_tokens)
            LLM_TOKENS.labels("shared_prefix").inc(step.llm.shared_prefix_tokens)
        if step.action and step.observation is not None:
            TOOL_CALLS.labels(step.action, step.observation.status).inc()
            key = ToolCall("", step.action, step.args).key()
            if seen[key]:
                REPEATED_CALLS.labels(step.action).inc()
            seen[key] += 1


class RequestMetrics:
    """ASGI middleware: count and time every request under its route template, not its raw path."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", None) or "unmatched"
            REQUESTS.labels(scope["method"], endpoint, str(status)).inc()
            REQUEST_SECONDS.labels(scope["method"], endpoint).observe(time.perf_counter() - started)
