"""Lock-out before the hands-on work: an order enters in_progress with its device's isolation confirmed,
and, where the plant maps a zero-energy signal for the device, only while that signal says de-energised.

The plant is read here, through the agent's PLC tool (its read budget, breakers and cache), and the
reading is handed to the work-order store to keep with the confirmation: the store holds no PLC code.
Every way in moves orders through `IsolationGate.move`: the tablet's route, the MES webhook and the CLI.
Whether the plant requires the confirmation is a rule kept in the work-order store, which refuses a move
to in_progress without one while it is on (`WorkOrderStore.isolation_rule`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel

from edge.run import new_id
from tools.contract import Actor, ToolContext
from tools.plant import DeviceConfig, ZeroEnergySignal
from tools.plc.tool import PlcReadTool
from tools.registry import ToolRegistry
from tools.work_orders.model import (
    ISOLATING_STATUS,
    IllegalTransition,
    IsolationConfirmation,
    RecordedReading,
    WorkOrder,
    WorkOrderNotFound,
)
from tools.work_orders.store import WorkOrderStore

if TYPE_CHECKING:
    from edge.service.schemas import StatusChange
    from edge.service.service import Service


class SensorRead(BaseModel):
    """One sensor read through the PLC tool: the reading (None when the tool had none to give), the tool's
    sentence about it, and the observation's status and error code."""

    reading: RecordedReading | None
    text: str
    status: str
    error_code: str | None = None
    is_outlier: bool = False


class StillEnergised(IllegalTransition):
    """The device's zero-energy signal does not show it de-energised now (or cannot be read): a conflict with
    the plant's state, which the technician may resolve and confirm again."""


def read_sensor(registry: ToolRegistry, device_id: str, sensor: str, actor: Actor = "technician") -> SensorRead:
    """Read one sensor as a run would (validated, within the tool's timeout), outside any run."""
    ctx = ToolContext(request_id=new_id("req"), run_id="", loop_step=0, actor=actor)
    obs = registry.call(PlcReadTool.name, {"device_id": device_id, "sensor": sensor}, ctx, "plc-read")
    ref = next((item.fields for item in obs.content if item.kind == "ref"), None)
    reading = (
        RecordedReading(
            device_id=ref["device_id"],
            sensor=ref["sensor"],
            label=ref.get("label") or "",
            value=ref["value"],
            unit=ref.get("unit") or "",
            quality=ref["quality"],
            source=ref["source"],
            ts_ms=ref.get("ts_ms"),
        )
        if ref is not None
        else None
    )
    return SensorRead(
        reading=reading,
        text=" ".join(item.text for item in obs.content if item.text),
        status=obs.status,
        error_code=obs.error_code,
        is_outlier=bool(ref and ref.get("is_outlier")),
    )


Reader = Callable[[str, str], SensorRead]


class IsolationGate:
    """`read(device_id, sensor)` reads through the PLC tool; None for a gate that reads nothing (a plant
    whose devices map no zero-energy signal)."""

    def __init__(
        self,
        store: WorkOrderStore,
        devices: Mapping[str, DeviceConfig] | None = None,
        read: Reader | None = None,
    ):
        self.store = store
        self.devices = devices or {}
        self.read = read

    @classmethod
    def of(cls, service: Service, actor: Actor = "technician") -> IsolationGate:
        registry = service.agent.registry
        return cls(
            service.work_orders,
            service.config.devices,
            lambda device_id, sensor: read_sensor(registry, device_id, sensor, actor),
        )

    def move(self, work_order_id: str, change: StatusChange, actor: str) -> WorkOrder:
        """Move the order as `change` says; into in_progress only with isolation confirmed when the plant
        requires it (the store's rule, whatever this process's config says), and only while the device's
        zero-energy signal reads de-energised when it maps one. A refusal writes nothing."""
        isolation = self._confirmation(work_order_id, change) if change.status == ISOLATING_STATUS else None
        return self.store.set_status(work_order_id, change.status, actor, change.fix(), isolation)

    def _confirmation(self, work_order_id: str, change: StatusChange) -> IsolationConfirmation | None:
        if not change.isolation_confirmed or change.by is None:
            return None
        order = self.store.get(work_order_id)
        if order is None:
            raise WorkOrderNotFound(f"no work order {work_order_id!r}")
        device = self.devices.get(order.device_id)
        signal = device.isolation.zero_energy if device is not None and device.isolation is not None else None
        if device is None or signal is None:
            return IsolationConfirmation(by=change.by)
        return IsolationConfirmation(by=change.by, reading=self._de_energised(device, signal))

    def _de_energised(self, device: DeviceConfig, signal: ZeroEnergySignal) -> RecordedReading:
        sensor = device.sensors[signal.sensor]
        wanted = f"{sensor.label or sensor.id} {signal.condition()} {sensor.unit}".rstrip()
        refused = f"{device.id} cannot be confirmed isolated"
        if self.read is None:
            raise StillEnergised(f"{refused}: its zero-energy signal {signal.sensor} cannot be read here")
        read = self.read(device.id, signal.sensor)
        reading = read.reading
        if reading is None or reading.value is None:
            raise StillEnergised(
                f"{refused}: no communication with its PLC, so {signal.sensor} could not be read "
                f"({read.error_code or read.status}: {read.text}). Isolation needs a live reading of {wanted}."
            )
        shown = f"{reading.value:g} {reading.unit}".rstrip()
        if reading.quality != "Good" or reading.source != "live":
            raise StillEnergised(
                f"{refused}: no communication with its PLC; {reading.label} is only the cached {shown} "
                f"(quality {reading.quality}). Isolation needs a live reading of {wanted}."
            )
        if read.is_outlier:
            raise StillEnergised(
                f"{refused}: {reading.label} reads {shown} (quality {reading.quality}), outside its plausible "
                f"range: a suspected sensor fault proves nothing. Isolation needs {wanted}."
            )
        if not signal.de_energised(reading.value):
            raise StillEnergised(
                f"{refused}: it is still energised. {reading.label} reads {shown} (quality {reading.quality}, "
                f"{reading.source}); isolation needs {wanted}. Finish the isolation steps, wait, and confirm again."
            )
        return reading
