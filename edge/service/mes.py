"""`POST /v1/mes/alarms`: the MES reports an alarm; `POST /v1/mes/work-order-status`: the MES moves a
work order along its lifecycle and, closing it, says what was found and done. Both signed as Standard Webhooks.

Order of checks: the signature headers and timestamp before a byte of the
body is read (401), the body read up to the route's size limit (413), the
signature over it (401), then the body (422 naming the field), then the
webhook-id: a replay gets the response stored for its first delivery, so an
MES retrying after a lost response cannot start a second run. While
`max_concurrent_alarms` run, another alarm gets 503 with Retry-After.
Only a handled alarm leaves a record; a refused or failed one leaves nothing.
A status change follows the same order; an unknown order is 404, a move its lifecycle does not allow 409,
and either leaves nothing, so the MES may send it again once the order is where it expects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from starlette.concurrency import run_in_threadpool

from edge.service.errors import detail_response, status_of
from edge.service.schemas import StatusChange
from tools.plant import UnknownDevice
from tools.work_orders.model import FaultCode
from tools.work_orders.signing import SignatureError, check_headers, verify
from tools.work_orders.store import WebhookInProgress, WorkOrderStore

ALARMS_PATH = "/v1/mes/alarms"
STATUS_PATH = "/v1/mes/work-order-status"


class AlarmsBusy(Exception):
    """Raised by `handle_alarm` when it takes no more alarms for now; the MES is told when to retry."""

    def __init__(self, retry_after_s: int):
        super().__init__(f"every alarm slot is busy; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class MesAlarm(BaseModel):
    # MES vendors add their own fields; ignoring them keeps the integration from breaking on an upgrade.
    model_config = ConfigDict(extra="ignore")

    event_id: str = Field(min_length=1, max_length=200, description="the MES's id of this alarm occurrence")
    device_id: str = Field(min_length=1, description="device id as configured, e.g. press-3")
    fault_code: FaultCode
    occurred_at: AwareDatetime = Field(description="when the alarm was raised, ISO 8601 with a UTC offset")
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    message: str = Field(default="", max_length=2000)

    @field_validator("device_id")
    @classmethod
    def _known_device(cls, value: str, info: ValidationInfo) -> str:
        known = (info.context or {}).get("devices")
        if known is not None and value not in known:
            raise UnknownDevice(value, known)
        return value

    def context_alarm(self) -> dict[str, Any]:
        """The `ToolContext.alarm` dict: the occurrence identity the work-order tool keys on."""
        return self.model_dump(mode="json")


class MesStatusChange(StatusChange):
    """A status change from the MES: the tablet's body with the order's id, closing fields as `Fix` has them."""

    model_config = ConfigDict(extra="ignore")

    work_order_id: str = Field(
        min_length=1, max_length=64, description="the order's id as fixloop gave it, e.g. WO-3F9A1C2B7D4E5F60"
    )


def build_mes_router(
    verify_secrets: list[str],
    handle_alarm: Callable[[MesAlarm], dict[str, Any]],
    store: WorkOrderStore,
    *,
    known_devices: Collection[str] | None = None,
    tolerance_s: float = 300.0,
    replay_ttl_s: float = 86400.0,
    claim_timeout_s: float = 60.0,
    clock: Callable[[], float] = time.time,
) -> APIRouter:
    """`handle_alarm` runs the agent on a verified alarm and returns the JSON response body
    (the work order and the run id); it is called at most once per webhook-id. Status changes
    are applied to `store` directly, as the MES's."""
    router = APIRouter()

    async def verified(request: Request, now: float) -> tuple[str, bytes] | JSONResponse:
        """The webhook-id and body of a request signed with one of the secrets; else the 401."""
        try:
            check_headers(verify_secrets, request.headers, now, tolerance_s)
            body = await request.body()
            return verify(verify_secrets, request.headers, body, now, tolerance_s), body
        except SignatureError as exc:
            return detail_response(f"webhook verification failed: {exc}", 401)

    async def claimed(webhook_id: str, now: float) -> JSONResponse | None:
        """None when this request owns the webhook-id now; else the stored answer to a replay, or the 409."""
        try:
            earlier = await run_in_threadpool(store.claim_webhook, webhook_id, now, claim_timeout_s, replay_ttl_s)
        except WebhookInProgress as exc:
            return detail_response(str(exc), 409, {"retry-after": "1"})
        if earlier is not None:
            return JSONResponse(
                earlier["body"], status_code=earlier["status_code"], headers={"webhook-replayed": "true"}
            )
        return None

    async def handled(
        request: Request, parse: Callable[[bytes], Any], act: Callable[[Any], dict[str, Any]], failed: str
    ) -> JSONResponse:
        """Verify, parse, claim the webhook-id, act once (off the event loop), store the answer for replays.
        A refused or failed action releases the claim, so a retry of this webhook-id is handled afresh."""
        now = clock()
        signed = await verified(request, now)
        if isinstance(signed, JSONResponse):
            return signed
        webhook_id, body = signed
        try:
            parsed = parse(body)
        except ValidationError as exc:
            return detail_response(_field_errors(exc), 422)
        if (answered := await claimed(webhook_id, now)) is not None:
            return answered
        try:
            result = await run_in_threadpool(act, parsed)
        except Exception as exc:
            await run_in_threadpool(store.release_webhook, webhook_id)
            return _failure(exc, failed)
        await run_in_threadpool(store.finish_webhook, webhook_id, 200, result)
        return JSONResponse(result, status_code=200)

    alarm_context = {"devices": set(known_devices)} if known_devices is not None else None

    @router.post(ALARMS_PATH)
    async def receive_alarm(request: Request) -> JSONResponse:
        return await handled(
            request,
            lambda body: MesAlarm.model_validate_json(body, context=alarm_context),
            handle_alarm,
            "alarm handling",
        )

    def change_status(change: MesStatusChange) -> dict[str, Any]:
        order = store.set_status(change.work_order_id, change.status, "mes", change.fix())
        return {"work_order": order.model_dump(mode="json")}

    @router.post(STATUS_PATH)
    async def receive_status(request: Request) -> JSONResponse:
        return await handled(request, MesStatusChange.model_validate_json, change_status, "status change")

    return router


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
