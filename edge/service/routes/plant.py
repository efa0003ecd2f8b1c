"""The plant as the tablet sees it: devices and their sensors with their history, the tools, the work orders."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool

from edge.service.isolation import IsolationGate, SensorRead, read_sensor
from edge.service.json_body import json_body, json_body_openapi
from edge.service.schemas import ChecklistTickBody, DeviceView, SensorView, StatusChange, TickResult, ToolView
from edge.service.service import ServiceDep
from tools.manual_search.tool import ManualSearchTool
from tools.plant import UnknownDevice, require
from tools.plc.history import SensorHistory, UnknownSensor, sensor_history
from tools.plc.tool import PlcReadTool
from tools.work_orders.model import ACTIVE_STATUSES, WorkOrder, WorkOrderNotFound
from tools.work_orders.tool import WorkOrderTool

router = APIRouter(tags=["plant"])
# A day: the default retention of the PLC cache's history.
MAX_HISTORY_S = 86_400
# The tablet words each tool's steps in its own way: it knows the tools by these roles, not by the
# names the model sees.
TOOL_ROLES = {ManualSearchTool.name: "manual", PlcReadTool.name: "plc", WorkOrderTool.name: "order"}


# The device and tool lists answer on the event loop (see routes.health): nothing in them blocks.
@router.get("/v1/devices")
async def devices(service: ServiceDep) -> list[DeviceView]:
    return [
        DeviceView(
            id=device_id,
            name=d.name,
            name_zh=d.name_zh,
            vendor=d.vendor,
            model=d.model,
            sensors=[SensorView(id=s.id, label=s.label, label_zh=s.label_zh, unit=s.unit) for s in d.sensors.values()],
            isolation=d.isolation,
        )
        for device_id, d in service.config.devices.items()
    ]


@router.get(
    "/v1/devices/{device_id}/sensors/{sensor}/history", responses={404: {"description": "No such device or sensor."}}
)
async def history(
    service: ServiceDep,
    device_id: str,
    sensor: str,
    window_s: float = Query(
        default=3600, gt=0, le=MAX_HISTORY_S, description="how far back, in seconds (at most the retention)"
    ),
) -> SensorHistory:
    """The sensor's readings (polls and tool reads) with its unit, alarm limits and the last hour's trend."""
    try:
        return await run_in_threadpool(
            sensor_history, service.plc_history, service.config.devices, device_id, sensor, window_s
        )
    except (UnknownDevice, UnknownSensor) as exc:
        # Named in the path, a device or sensor the plant lacks is a resource that is not there; named in a
        # body (POST /v1/runs) an unknown device is a bad field, 422 (edge.service.errors).
        raise HTTPException(404, str(exc)) from None


@router.get(
    "/v1/devices/{device_id}/sensors/{sensor}/reading", responses={404: {"description": "No such device or sensor."}}
)
def reading(service: ServiceDep, device_id: str, sensor: str) -> SensorRead:
    """The sensor read now through the agent's PLC tool (live, else the cache marked with its age and quality),
    for a checklist step that names it."""
    _require_sensor(service, device_id, sensor)
    return read_sensor(service.agent.registry, device_id, sensor)


def _require_sensor(service: ServiceDep, device_id: str, sensor: str) -> None:
    try:
        device = require(service.config.devices, device_id)
    except UnknownDevice as exc:
        raise HTTPException(404, str(exc)) from None
    if sensor not in device.sensors:
        raise HTTPException(
            404, f"device {device_id} has no sensor {sensor!r}; its sensors: {', '.join(device.sensors)}"
        )


@router.get("/v1/tools")
async def tools(service: ServiceDep) -> list[ToolView]:
    return [
        ToolView(
            name=tool.name, role=TOOL_ROLES.get(tool.name), description=tool.description, side_effect=tool.side_effect
        )
        for tool in service.agent.registry
    ]


@router.get("/v1/work-orders")
def work_orders(
    service: ServiceDep, device_id: str | None = None, active: bool = True, limit: int = Query(default=20, ge=1, le=200)
) -> list[WorkOrder]:
    return service.work_orders.list(ACTIVE_STATUSES if active else (), device_id=device_id, limit=limit)


OrderId = Annotated[str, PathParam(min_length=1, max_length=64, description="the order's id, e.g. WO-3F9A1C2B7D4E5F60")]


@router.get("/v1/work-orders/{work_order_id}", responses={404: {"description": "No such work order."}})
def work_order(service: ServiceDep, work_order_id: OrderId) -> WorkOrder:
    """One order's record: its status, its isolation confirmation and its checklist ticks in the order applied."""
    order = service.work_orders.get(work_order_id)
    if order is None:
        raise WorkOrderNotFound(f"no work order {work_order_id!r}")
    return order


@router.post(
    "/v1/work-orders/{work_order_id}/status",
    openapi_extra=json_body_openapi(StatusChange),
    responses={
        404: {"description": "No such work order."},
        409: {
            "description": "The order's lifecycle does not allow this move from where it is now (the detail says "
            "where it is and what it allows)."
        },
        422: {
            "description": "A bad body: malformed JSON, an unknown status or field, or a fix (cause, remedy, parts, "
            "note) on a move that does not close the order; a name (by) that shows nothing or holds a control "
            "or bidirectional control character; or a move to in_progress without isolation_confirmed while the "
            "plant requires isolation (`fixloop work-orders isolation-rule`)."
        },
    },
)
async def set_work_order_status(
    service: ServiceDep,
    change: Annotated[StatusChange, Depends(json_body(StatusChange))],
    work_order_id: OrderId,
) -> WorkOrder:
    """A technician moves a work order along its lifecycle (open → acknowledged → in_progress → done, or
    cancelled); closing it records what was found and done, which the next occurrence of the fault is told.
    Entering in_progress with `isolation_confirmed` records who confirmed the device isolated, and when; where
    the device maps a zero-energy signal it is read through the PLC tool, and the move is refused (409, the
    reading in the detail) while it reads energised or cannot be read live."""
    return await run_in_threadpool(IsolationGate.of(service).move, work_order_id, change, "technician")


@router.post(
    "/v1/work-orders/{work_order_id}/checklist",
    openapi_extra=json_body_openapi(ChecklistTickBody),
    responses={
        404: {"description": "No such work order."},
        409: {"description": "The order is closed, or the client_tick_id was applied with another step or state."},
        422: {
            "description": "A bad body (a text or name that shows nothing, a name holding a control or "
            "bidirectional control character), or a sensor the order's device does not have."
        },
    },
)
async def tick_checklist_step(
    service: ServiceDep,
    tick: Annotated[ChecklistTickBody, Depends(json_body(ChecklistTickBody))],
    work_order_id: OrderId,
) -> TickResult:
    """A step of the remedy ticked on the tablet, kept on the order with who and when, applied once per
    client_tick_id. A step naming a sensor has it read through the PLC tool as the tick is applied, and the
    reading kept with it. The MES sees the ticks with the order's next status change (its checklist)."""
    return await run_in_threadpool(_tick, service, work_order_id, tick)


def _tick(service: ServiceDep, work_order_id: str, tick: ChecklistTickBody) -> TickResult:
    order = service.work_orders.get(work_order_id)
    if order is None:
        raise WorkOrderNotFound(f"no work order {work_order_id!r}")
    reading = None
    if tick.sensor is not None and tick.done:
        sensors = service.config.devices[order.device_id].sensors if order.device_id in service.config.devices else {}
        if tick.sensor not in sensors:
            raise HTTPException(422, f"sensor {tick.sensor!r} is not a sensor of {order.device_id}")
        reading = read_sensor(service.agent.registry, order.device_id, tick.sensor).reading
    updated, applied = service.work_orders.tick(
        work_order_id,
        client_tick_id=tick.client_tick_id,
        step_key=tick.step_key,
        text=tick.text,
        done=tick.done,
        by=tick.by,
        ticked_at=tick.ticked_at.isoformat() if tick.ticked_at else None,
        reading=reading,
    )
    return TickResult(work_order=updated, applied=applied)
