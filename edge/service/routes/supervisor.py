"""Behind a supervisor token: vouching for what a technician reported. A fix given in feedback on an answer is
an unverified report (shown as such, never evidence) until a supervisor confirms it here."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from edge.service.feedback import confirm_fix
from edge.service.json_body import json_body, json_body_openapi
from edge.service.schemas import ConfirmFixBody, FeedbackResult
from edge.service.service import ServiceDep

router = APIRouter(tags=["runs"])


@router.post(
    "/v1/runs/{run_id}/feedback/confirm",
    openapi_extra=json_body_openapi(ConfirmFixBody),
    responses={
        404: {"description": "No such run, or no fix standing by `reporter` on it."},
        409: {"description": "The run is still running, or `by` is the reporter: someone else confirms a fix."},
        422: {"description": "A bad body: a name missing or only whitespace, an unknown field."},
    },
)
async def confirm(
    run_id: str, service: ServiceDep, body: Annotated[ConfirmFixBody, Depends(json_body(ConfirmFixBody))]
) -> FeedbackResult:
    """`by` confirms the fix `reporter` gave on the answer: it becomes a recorded fix, shown with who confirmed
    it. Confirming again keeps the first confirmation; a changed fix is unverified again until confirmed."""
    return await run_in_threadpool(confirm_fix, service.runs, service.work_orders, run_id, body)
