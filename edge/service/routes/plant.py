"""The plant as the tablet sees it: devices and their sensors with their history, the tools, the work orders."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query
from starlette.concurrency import run_in_threadpool

from edge.service.schemas import DeviceView, SensorView, ToolView
from edge.service.service import ServiceDep
from tools.manual_search.tool import ManualSearchTool
from tools.plant import UnknownDevice
from tools.plc.history import SensorHistory, UnknownSensor, sensor_history
from tools.plc.tool import PlcReadTool
from tools.work_orders.model import ACTIVE_STATUSES, WorkOrder
from tools.work_orders.tool import WorkOrderTool

router = APIRouter(tags=["plant"])
# The tablet words each tool's steps in its own way: it knows the tools by these roles, not by the
# names the model sees.
# A day: the default retention of the PLC cache's history.
MAX_HISTORY_S = 86_400
TOOL_ROLES = {ManualSearchTool.name: "manual", PlcReadTool.name: "plc", WorkOrderTool.name: "order"}


# The device and tool lists answer on the event loop (see routes.health): nothing in them blocks.
@router.get("/v1/devices")
async def devices(service: ServiceDep) -> list[DeviceView]:
    return [DeviceView(id=device_id, name=d.name, name_zh=d.name_zh, vendor=d.vendor, model=d.model,
                       sensors=[SensorView(id=s.id, label=s.label, label_zh=s.label_zh, unit=s.unit)
                                for s in d.sensors.values()])
            for device_id, d in service.config.devices.items()]


@router.get("/v1/devices/{device_id}/sensors/{sensor}/history", responses={404: {"description": "No such device or sensor."}})
async def history(service: ServiceDep, device_id: str, sensor: str,
                  window_s: float = Query(default=3600, gt=0, le=MAX_HISTORY_S,
                                          description="how far back, in seconds (at most the retention)")) -> SensorHistory:
    """The sensor's readings (polls and tool reads) with its unit, alarm limits and the last hour's trend."""
    try:
        return await run_in_threadpool(sensor_history, service.plc_history, service.config.devices, device_id,
                                       sensor, window_s)
    except (UnknownDevice, UnknownSensor) as exc:
        raise HTTPException(404, str(exc)) from None


@router.get("/v1/tools")
async def tools(service: ServiceDep) -> list[ToolView]:
    return [ToolView(name=tool.name, role=TOOL_ROLES.get(tool.name), description=tool.description,
                     side_effect=tool.side_effect) for tool in service.agent.registry]


@router.get("/v1/work-orders")
def work_orders(service: ServiceDep, device_id: str | None = None, active: bool = True,
                limit: int = Query(default=20, ge=1, le=200)) -> list[WorkOrder]:
    return service.work_orders.list(ACTIVE_STATUSES if active else (), device_id=device_id, limit=limit)
