"""Runs: ask and watch the steps stream in, pick a stream up again, read records, take over, confirm, give
feedback on the answer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from edge.run import RunEvent, RunFilter, RunSummary, TerminationReason
from edge.service import metrics
from edge.service.event_stream import event_stream, event_stream_responses
from edge.service.feedback import give_feedback, withdraw_fix
from edge.service.json_body import json_body, json_body_openapi
from edge.service.schemas import (
    AskBody,
    ConfirmResult,
    FeedbackBody,
    FeedbackResult,
    RunView,
    TakeoverResult,
    WithdrawFixBody,
)
from edge.service.service import ServiceDep

router = APIRouter(tags=["runs"])
# `GET /v1/runs?min_steps=`: far above any loop budget, and far inside SQLite's 64-bit integers.
MAX_STEPS_FILTER = 10_000


@router.post(
    "/v1/runs",
    response_class=StreamingResponse,
    openapi_extra=json_body_openapi(AskBody),
    responses=event_stream_responses(
        "The run's events as they happen, ending with `stored` (the record is saved) or `error`. "
        "The run goes on if the stream drops: resume it at `GET /v1/runs/{run_id}/stream`. A repeated "
        "`client_request_id` streams the run it started, from its first event."
    ),
)
async def start_run(
    request: Request, service: ServiceDep, body: Annotated[AskBody, Depends(json_body(AskBody))]
) -> StreamingResponse:
    received = time.perf_counter()
    asked = await run_in_threadpool(
        service.ask, body.question, body.device_id, body.session_id, request.state.request_id, body.client_request_id
    )
    # A repeat's first event is a replay, not what a technician waited for: it is not timed.
    return event_stream(
        asked.events if asked.repeat else _timed(asked.events, received),
        headers={"X-Run-ID": asked.run_id, "X-Session-ID": asked.session_id or ""},
        keep_alive_s=service.keep_alive_s,
    )


async def _timed(events: AsyncIterator[tuple[int, RunEvent]], received: float) -> AsyncIterator[tuple[int, RunEvent]]:
    """The events, with the time to the first one counted: what a technician waits before seeing anything."""
    async for n, event in events:
        if n == 0:
            metrics.FIRST_EVENT_SECONDS.observe(time.perf_counter() - received)
        yield n, event


@router.get("/v1/runs")
def list_runs(
    service: ServiceDep,
    device_id: str | None = None,
    session_id: str | None = None,
    reason: TerminationReason | None = None,
    fault_code: str | None = None,
    min_steps: int | None = Query(default=None, ge=0, le=MAX_STEPS_FILTER),
    limit: int = Query(default=20, ge=1, le=200),
) -> list[RunSummary]:
    return service.run_store.list(
        RunFilter(
            device_id=device_id,
            session_id=session_id,
            reason=reason,
            fault_code=fault_code,
            min_steps=min_steps,
            limit=limit,
        )
    )


@router.get("/v1/runs/{run_id}")
def get_run(run_id: str, service: ServiceDep) -> RunView:
    return service.runs.view(run_id)


@router.post("/v1/runs/{run_id}/takeover")
def takeover(run_id: str, service: ServiceDep) -> TakeoverResult:
    return service.runs.takeover(run_id)


@router.post("/v1/runs/{run_id}/confirm")
async def confirm(run_id: str, request: Request, service: ServiceDep) -> ConfirmResult:
    return await service.confirmations.confirm(run_id, request.state.request_id)


@router.post(
    "/v1/runs/{run_id}/feedback",
    openapi_extra=json_body_openapi(FeedbackBody),
    responses={
        404: {"description": "No such run."},
        409: {"description": "The run is still running: give feedback on its answer."},
        422: {
            "description": "A bad body: malformed JSON, `helpful` not true or false, `by` or `fix` only whitespace, "
            "an unknown field."
        },
    },
)
async def feedback(
    run_id: str, service: ServiceDep, body: Annotated[FeedbackBody, Depends(json_body(FeedbackBody))]
) -> FeedbackResult:
    """Whether the answer helped, and what actually fixed it; `GET /v1/runs/{run_id}` lists it with the record."""
    return await run_in_threadpool(give_feedback, service.runs, service.work_orders, run_id, body)


@router.post(
    "/v1/runs/{run_id}/feedback/withdraw",
    openapi_extra=json_body_openapi(WithdrawFixBody),
    responses={
        404: {"description": "No such run, or no feedback by `by` on it."},
        409: {"description": "The run is still running."},
        422: {"description": "A bad body: `by` missing or only whitespace, an unknown field."},
    },
)
async def withdraw(
    run_id: str, service: ServiceDep, body: Annotated[WithdrawFixBody, Depends(json_body(WithdrawFixBody))]
) -> FeedbackResult:
    """The reporter takes back the fix they gave on the answer: it leaves the fault's past fixes."""
    return await run_in_threadpool(withdraw_fix, service.runs, service.work_orders, run_id, body)


@router.get(
    "/v1/runs/{run_id}/stream",
    response_class=StreamingResponse,
    responses=event_stream_responses(
        "The run's events after `Last-Event-ID` (all of them without it): those it already has, then the rest as "
        "they happen; replayed from its record once stored. Ends with `stored` or `error`."
    ),
)
def follow_run(
    run_id: str, service: ServiceDep, last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0)] = None
) -> StreamingResponse:
    first = 0 if last_event_id is None else last_event_id + 1
    return event_stream(
        service.runs.follow(run_id, first), headers={"X-Run-ID": run_id}, keep_alive_s=service.keep_alive_s
    )


@router.get("/v1/runs/{run_id}/events")
def run_events(run_id: str, service: ServiceDep) -> list[RunEvent]:
    """The run's events so far, each one's number its index; a stored run's end with `stored`."""
    return service.runs.events(run_id)
