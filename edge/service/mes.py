"""`POST /v1/mes/alarms`: the MES reports an alarm; `POST /v1/mes/work-order-status`: the MES moves a
work order along its lifecycle and, closing it, says what was found and done. Both signed as Standard Webhooks.

The checks and the once-per-delivery answer are `edge.service.webhooks.SignedWebhooks`; a replay gets the
response stored for its first delivery, so an MES retrying after a lost response cannot start a second
run. While `max_concurrent_alarms` run, another alarm gets 503 with Retry-After.
Only a handled alarm leaves a record; a refused or failed one leaves nothing.
A status change follows the same order; an unknown order is 404, a move its lifecycle does not allow 409,
and either leaves nothing, so the MES may send it again once the order is where it expects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from edge.service.isolation import IsolationGate
from edge.service.schemas import StatusChange
from edge.service.webhooks import SignedWebhooks
from tools.plant import UnknownDevice
from tools.text_fields import printable, stored_text
from tools.work_orders.model import FaultCode
from tools.work_orders.store import WorkOrderStore

ALARMS_PATH = "/v1/mes/alarms"
STATUS_PATH = "/v1/mes/work-order-status"


class MesAlarm(BaseModel):
    # MES vendors add their own fields; ignoring them keeps the integration from breaking on an upgrade.
    model_config = ConfigDict(extra="ignore")

    event_id: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(stored_text)] = Field(
        description="the MES's id of this alarm occurrence"
    )
    device_id: str = Field(min_length=1, description="device id as configured, e.g. press-3")
    fault_code: FaultCode
    occurred_at: AwareDatetime = Field(description="when the alarm was raised, ISO 8601 with a UTC offset")
    severity: Literal["low", "medium", "high", "critical"] = "medium"
    message: Annotated[str, Field(max_length=2000), AfterValidator(printable)] = ""

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

    work_order_id: Annotated[str, Field(min_length=1, max_length=64), AfterValidator(stored_text)] = Field(
        description="the order's id as fixloop gave it, e.g. WO-3F9A1C2B7D4E5F60"
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
    isolation: IsolationGate | None = None,
) -> APIRouter:
    """`handle_alarm` runs the agent on a verified alarm and returns the JSON response body
    (the work order and the run id); it is called at most once per webhook-id. Status changes
    are applied to `store` as the MES's, through `isolation` (the plant's lock-out rules; without one,
    a confirmation is recorded as sent and nothing is read)."""
    gate = isolation or IsolationGate(store)
    webhooks = SignedWebhooks(
        verify_secrets,
        store,
        tolerance_s=tolerance_s,
        replay_ttl_s=replay_ttl_s,
        claim_timeout_s=claim_timeout_s,
        clock=clock,
    )
    alarm_context = {"devices": set(known_devices)} if known_devices is not None else None
    router = APIRouter()

    @router.post(ALARMS_PATH)
    async def receive_alarm(request: Request) -> JSONResponse:
        def parse(body: bytes) -> MesAlarm:
            return MesAlarm.model_validate_json(body, context=alarm_context)

        return await webhooks.handle(request, parse, handle_alarm, "alarm handling")

    @router.post(STATUS_PATH)
    async def receive_status(request: Request) -> JSONResponse:
        return await webhooks.handle(
            request, MesStatusChange.model_validate_json, partial(change_status, gate), "status change"
        )

    return router


def change_status(gate: IsolationGate, change: MesStatusChange) -> dict[str, Any]:
    order = gate.move(change.work_order_id, change, "mes")
    return {"work_order": order.model_dump(mode="json")}
