"""`generate_work_order`: the one tool with a side effect, exactly-once in effect."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from knowledge.codes import fault_key
from tools.contract import Item, Tool, ToolContext, ToolOutput
from tools.plant import DeviceConfig, find_device, unknown_device
from tools.work_orders.config import WorkOrderConfig
from tools.work_orders.history import FIX_FIELDS, RECURRENCE_FIELDS, history_items
from tools.work_orders.model import SEVERITY_PRIORITY, FaultCode, Priority, WorkOrder, normalize_fault_code
from tools.work_orders.store import WorkOrderStore

TITLE_MAX = 80
SOURCE = "work_orders"


class WorkOrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    device_id: str = Field(
        description="device id exactly as configured, e.g. press-3, cnc-7",
        examples=["press-3"],
    )
    fault_code: FaultCode
    # Stripped before the length check, so a summary of spaces is refused rather than stored empty.
    summary: Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=2000)] = Field(
        description="one or two sentences: the symptom and the evidence, e.g. motor overheating, 92 °C",
        examples=["motor overheating, motor_temp 92 °C"],
    )
    priority: Priority | None = Field(
        default=None,
        description="low, medium, high or urgent; leave out for the alarm's severity (else medium)",
    )

    @field_validator("device_id")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


class WorkOrderTool(Tool):
    name = "generate_work_order"
    description = (
        "Open a maintenance work order for one device and fault code, or get back the order already open for it. "
        "Use when the user asks for a work order or the fault needs a technician on site. "
        "The result also lists how this fault was fixed before, on this machine and on machines of the same model."
    )
    input_model = WorkOrderArgs
    output_fields = (
        frozenset(
            {
                "work_order_id",
                "device_id",
                "fault_code",
                "title",
                "summary",
                "priority",
                "work_order_status",
                "created",
                "created_at",
            }
        )
        | FIX_FIELDS
        | RECURRENCE_FIELDS
    )
    side_effect = True

    def __init__(self, store: WorkOrderStore, devices: dict[str, DeviceConfig], config: WorkOrderConfig):
        self.store = store
        self.devices = devices
        self.config = config

    def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        assert isinstance(args, WorkOrderArgs)  # the registry validated args against input_model
        device_id = find_device(self.devices, args.device_id)
        if device_id is None:
            return unknown_device(self.devices, args.device_id, SOURCE)
        args = args.model_copy(update={"device_id": device_id})
        if ctx.alarm:
            bound = _bind_to_alarm(args, ctx.alarm)
            if isinstance(bound, ToolOutput):
                return bound
            args = bound
        refused = _refusal(args, ctx, self.store.active_for(args.device_id, args.fault_code) is not None)
        if refused is not None:
            return refused
        device = self.devices[device_id]
        priority = args.priority or SEVERITY_PRIORITY.get(str((ctx.alarm or {}).get("severity", "")).lower(), "medium")
        title = _title(device, args.fault_code, args.summary)

        if self._needs_confirmation(ctx):
            # Nothing is written until the technician confirms; an order already open needs no confirmation.
            existing = self.store.active_for(args.device_id, args.fault_code)
            if existing is not None:
                return self._with_history(_answer(existing, created=False), args, proposed=False)
            pending = {
                "device_id": args.device_id,
                "fault_code": args.fault_code,
                "title": title,
                "summary": args.summary,
                "priority": priority,
                "work_order_status": "pending_confirmation",
                "created": False,
            }
            proposal = ToolOutput(
                items=[
                    Item(
                        kind="ref",
                        text=f"Work order for {args.device_id} {args.fault_code} awaits the "
                        "technician's confirmation; nothing was created yet.",
                        fields=pending,
                    )
                ],
                source=SOURCE,
            )
            return self._with_history(proposal, args, proposed=True)

        order, created = self.store.create_or_get(
            device_id=args.device_id,
            fault_code=args.fault_code,
            title=title,
            summary=args.summary,
            priority=priority,
            created_by=ctx.actor,
            run_id=ctx.run_id,
            alarm=ctx.alarm,
            evidence=ctx.evidence,
        )
        return self._with_history(_answer(order, created), args, proposed=False)

    def _with_history(self, output: ToolOutput, args: WorkOrderArgs, proposed: bool) -> ToolOutput:
        """The order (or proposal) first, as every reader of this observation expects; its fault's past after it."""
        history = history_items(self.store, self.devices, args.device_id, args.fault_code, proposed)
        return output.model_copy(update={"items": [*output.items, *history]})

    def _needs_confirmation(self, ctx: ToolContext) -> bool:
        if ctx.confirmed:
            return False
        return ctx.require_confirmation or (self.config.require_confirmation and ctx.actor == "technician")


def _refusal(args: WorkOrderArgs, ctx: ToolContext, open_already: bool) -> ToolOutput | None:
    """An order only where the technician asked: for the device the request is about, not after "don't open
    a ticket", and on a code a manual search of this run listed for that device (a planner cannot open
    one on a code it made up) or that already has an open order (an MES alarm's, say: it is returned, not
    made). An MES alarm names its own device and code (`_bind_to_alarm`)."""
    if ctx.alarm:
        return None
    if ctx.orders_declined:
        return ToolOutput.error(
            "order_not_requested",
            "The technician said not to open a work order in this request.",
            "Do not call generate_work_order again; give the final answer.",
            source=SOURCE,
        )
    if ctx.devices and args.device_id not in ctx.devices:
        return ToolOutput.error(
            "device_mismatch",
            f"This request is about {', '.join(ctx.devices)}, not {args.device_id}: no work order for {args.device_id}.",
            f"Use device_id {ctx.devices[0]!r}, or give the final answer.",
            source=SOURCE,
        )
    listed = ctx.listed_codes is None or fault_key(args.fault_code) in {fault_key(c) for c in ctx.listed_codes}
    if not listed and not open_already:
        return ToolOutput.error(
            "code_not_listed",
            f"No manual search of this run lists {args.fault_code} for {args.device_id}.",
            f"Search the manual for {args.fault_code} on {args.device_id} first, or give the final answer.",
            source=SOURCE,
        )
    return None


def _bind_to_alarm(args: WorkOrderArgs, alarm: dict[str, Any]) -> WorkOrderArgs | ToolOutput:
    """An alarm run opens the alarm's order and no other: a model talked into other machines or codes
    is refused, and every call lands on the same order (its id is keyed on the alarm's occurrence)."""
    device_id = alarm.get("device_id") or args.device_id
    fault_code = normalize_fault_code(str(alarm["fault_code"])) if alarm.get("fault_code") else args.fault_code
    if device_id != args.device_id or fault_key(fault_code) != fault_key(args.fault_code):
        return ToolOutput.error(
            "bound_to_alarm",
            f"This run handles the MES alarm {fault_code} on {device_id}; it opens a work order for that alarm only, "
            f"not for {args.fault_code} on {args.device_id}.",
            f"Call generate_work_order with device_id {device_id!r} and fault_code {fault_code!r}, or give the final answer.",
            source=SOURCE,
        )
    return args.model_copy(update={"fault_code": fault_code})


def _title(device: DeviceConfig, fault_code: str, summary: str) -> str:
    head = summary.splitlines()[0] if summary else ""
    title = f"{device.name or device.id} {fault_code}: {head}"
    return title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 1].rstrip() + "…"


def _to_the_second(stamp: str) -> str:
    """An ISO time without its fraction of a second (`2026-12-05T11:14:06.549Z` -> `2026-12-05T11:14:06Z`)."""
    return re.sub(r"(T\d{2}:\d{2}:\d{2})\.\d+", r"\1", stamp)


def _answer(order: WorkOrder, created: bool) -> ToolOutput:
    fields: dict[str, Any] = {
        "work_order_id": order.id,
        "device_id": order.device_id,
        "fault_code": order.fault_code,
        "title": order.title,
        "summary": order.summary,
        "priority": order.priority,
        "work_order_status": order.status,
        "created": created,
        # To the second: Qwen2.5-Coder-0.5B read "11:14:06.549Z" as "open for 549 seconds".
        "created_at": _to_the_second(order.created_at),
    }
    if created:
        text = f"Work order {order.id} created for {order.device_id} {order.fault_code} ({order.priority})."
    else:
        text = (
            f"Existing order returned: {order.id} for {order.device_id} {order.fault_code} is {order.status}; "
            "no new order was created."
        )
    return ToolOutput(items=[Item(kind="ref", text=text, fields=fields)], source=SOURCE)
