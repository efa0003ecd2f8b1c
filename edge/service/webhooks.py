"""Signed webhooks from the MES, each delivery acted on once (Standard Webhooks: webhook-id, -timestamp,
-signature).

Order of checks: the signature headers and timestamp before a byte of the body is read (401), the body
(the route's size limit is the app's BodyLimit: 413), the signature over it (401), then the body (422
naming the field), then the webhook-id: a replay gets the response stored for its first delivery, so an
MES retrying after a lost response cannot act twice. A refused or failed action releases the claim and
leaves nothing, so a retry of the same webhook-id is handled afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from edge.service.errors import detail_response, status_of
from tools.work_orders.signing import SignatureError, check_headers, verify
from tools.work_orders.store import WebhookInProgress, WorkOrderStore


class AlarmsBusy(Exception):
    """Raised by an alarm handler when it takes no more alarms for now; the MES is told when to retry."""

    def __init__(self, retry_after_s: int):
        super().__init__(f"every alarm slot is busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class SignedWebhooks:
    """`handle` verifies, parses, claims the webhook-id, acts once (off the event loop) and stores the answer
    for replays; the claims and answers live in the work-order store, shared by every worker process."""

    def __init__(
        self,
        secrets: Sequence[str],
        store: WorkOrderStore,
        *,
        tolerance_s: float = 300.0,
        replay_ttl_s: float = 86400.0,
        claim_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.time,
    ):
        self.secrets = list(secrets)
        self.store = store
        self.tolerance_s = tolerance_s
        self.replay_ttl_s = replay_ttl_s
        self.claim_timeout_s = claim_timeout_s
        self.clock = clock

    async def handle(
        self, request: Request, parse: Callable[[bytes], Any], act: Callable[[Any], dict[str, Any]], failed: str
    ) -> JSONResponse:
        """`failed` names the action in a 500's detail ("alarm handling failed: ...")."""
        now = self.clock()
        signed = await self._verified(request, now)
        if isinstance(signed, JSONResponse):
            return signed
        webhook_id, body = signed
        try:
            parsed = parse(body)
        except ValidationError as exc:
            return detail_response(_field_errors(exc), 422)
        if (answered := await self._claimed(webhook_id, now)) is not None:
            return answered
        try:
            result = await run_in_threadpool(act, parsed)
        except Exception as exc:
            await run_in_threadpool(self.store.release_webhook, webhook_id)
            return _failure(exc, failed)
        await run_in_threadpool(self.store.finish_webhook, webhook_id, 200, result)
        return JSONResponse(result, status_code=200)

    async def _verified(self, request: Request, now: float) -> tuple[str, bytes] | JSONResponse:
        """The webhook-id and body of a request signed with one of the secrets; else the 401."""
        try:
            check_headers(self.secrets, request.headers, now, self.tolerance_s)
            body = await request.body()
            return verify(self.secrets, request.headers, body, now, self.tolerance_s), body
        except SignatureError as exc:
            return detail_response(f"webhook verification failed: {exc}", 401)

    async def _claimed(self, webhook_id: str, now: float) -> JSONResponse | None:
        """None when this request owns the webhook-id now; else the stored answer to a replay, or the 409."""
        try:
            earlier = await run_in_threadpool(
                self.store.claim_webhook, webhook_id, now, self.claim_timeout_s, self.replay_ttl_s
            )
        except WebhookInProgress as exc:
            return detail_response(str(exc), 409, {"retry-after": "1"})
        if earlier is None:
            return None
        return JSONResponse(earlier["body"], status_code=earlier["status_code"], headers={"webhook-replayed": "true"})


def _failure(exc: Exception, failed: str) -> JSONResponse:
    """A busy alarm slot is 503 with Retry-After; a refusal is answered as the tablet's is (edge.service.errors);
    anything else is a 500 naming what failed. Each quotes what was sent only cut short (`detail_response`)."""
    if isinstance(exc, AlarmsBusy):
        return detail_response(str(exc), 503, {"retry-after": str(exc.retry_after_s)})
    status = status_of(exc) or 500
    detail = str(exc) if status < 500 else f"{failed} failed: {type(exc).__name__}: {exc}"
    return detail_response(detail, status)


def _field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """FastAPI's 422 shape: each error names its field under `loc`."""
    errors = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        errors.append({"loc": ["body", *error["loc"]], "msg": error["msg"], "type": error["type"]})
    return errors
