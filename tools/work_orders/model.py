"""What a work order is: fields as CMMS/MES systems name them, its lifecycle, its identity."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from knowledge.codes import fault_key, reported_code

Priority = Literal["low", "medium", "high", "urgent"]
OrderStatus = Literal["open", "acknowledged", "in_progress", "done", "cancelled"]
OutboxStatus = Literal["pending", "delivered", "failed"]

PRIORITIES: tuple[str, ...] = ("low", "medium", "high", "urgent")
ACTIVE_STATUSES: tuple[str, ...] = ("open", "acknowledged", "in_progress")
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "open": ("acknowledged", "cancelled"),
    "acknowledged": ("in_progress", "cancelled"),
    "in_progress": ("done", "cancelled"),
    "done": (),
    "cancelled": (),
}
# MES alarm severity (ISA-18.2 style) to work-order priority.
SEVERITY_PRIORITY: dict[str, str] = {"low": "low", "medium": "medium", "high": "high", "critical": "urgent"}

FAULT_CODE_PATTERN = re.compile(r"^[A-Z0-9][A-Z0-9:._/-]{0,31}$")


class WorkOrderError(ValueError):
    """A request the store refuses; the message names what was wrong."""


class WorkOrderNotFound(WorkOrderError):
    pass


class IllegalTransition(WorkOrderError):
    pass


class WorkOrder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    device_id: str  # the asset
    fault_code: str  # the failure/problem code, as first spelled (identity is its `fault_key`)
    title: str
    summary: str
    priority: Priority
    status: OrderStatus
    created_by: str  # the actor: technician, mes, operator, agent
    source_run_id: str
    # Occurrence identity: "alarm:<event id>" from the MES, else "episode:<n>" (n-th order for this fault).
    occurrence: str
    alarm: dict[str, Any] | None = None
    evidence: list[dict[str, Any]] = []
    created_at: str
    updated_at: str


class OutboxRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    row_id: int
    webhook_id: str
    work_order_id: str | None
    event_type: str
    body: str
    status: OutboxStatus
    attempts: int
    next_attempt_at: float
    last_status_code: int | None
    last_error: str | None
    created_at: float
    # Give-up is measured from here: the first queueing, reset when an operator requeues the row.
    queued_at: float
    delivered_at: float | None


def normalize_fault_code(raw: str) -> str:
    """HMI codes are read aloud and typed in any case, with or without a cue word (`fault 123`);
    one spelling per code (`knowledge.codes.reported_code`) whoever reports it."""
    code = reported_code(raw)
    if not FAULT_CODE_PATTERN.match(code):
        raise WorkOrderError(
            f"fault code {raw!r} is not a code as printed on the HMI (letters, digits and : . _ / -, at most 32), e.g. E102, F03, 6065, ALARM:1"
        )
    return code


# The one fault-code type of every boundary: the work-order tool's arguments and the MES alarm.
FaultCode = Annotated[
    str,
    Field(max_length=64, description="fault code as printed on the HMI, e.g. E102, F03, 6065, ALARM:1", examples=["E102"]),
    AfterValidator(normalize_fault_code),
]


def order_id(device_id: str, fault_code: str, occurrence: str) -> str:
    digest = hashlib.sha256(f"{device_id}\x1f{fault_key(fault_code)}\x1f{occurrence}".encode()).hexdigest()
    return "WO-" + digest[:16].upper()


def alarm_occurrence(alarm: dict[str, Any] | None) -> str | None:
    """The MES's own identity of an alarm occurrence: its event id, else its time."""
    if not alarm:
        return None
    if alarm.get("event_id"):
        return f"alarm:{alarm['event_id']}"
    if alarm.get("occurred_at"):
        return f"alarm-at:{alarm['occurred_at']}"
    return None
