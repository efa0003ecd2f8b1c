"""What a work order is: fields as CMMS/MES systems name them, its lifecycle, its identity."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
)

from knowledge.codes import fault_key, reported_code
from tools.text_fields import BlankText, PersonName, stored_text

Priority = Literal["low", "medium", "high", "urgent"]
OrderStatus = Literal["open", "acknowledged", "in_progress", "done", "cancelled"]
OutboxStatus = Literal["pending", "delivered", "failed"]

PRIORITIES: tuple[str, ...] = ("low", "medium", "high", "urgent")
ACTIVE_STATUSES: tuple[str, ...] = ("open", "acknowledged", "in_progress")
# Final statuses: entering one closes the order and records what was found and done (`Fix`).
CLOSED_STATUSES: tuple[str, ...] = ("done", "cancelled")
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "open": ("acknowledged", "cancelled"),
    "acknowledged": ("in_progress", "cancelled"),
    "in_progress": ("done", "cancelled"),
    "done": (),
    "cancelled": (),
}
# The move that starts the hands-on work: the one a confirmation that the device is isolated goes with.
ISOLATING_STATUS = "in_progress"
# MES alarm severity (ISA-18.2 style) to work-order priority.
SEVERITY_PRIORITY: dict[str, str] = {"low": "low", "medium": "medium", "high": "high", "critical": "urgent"}

FAULT_CODE_PATTERN = re.compile(r"^[A-Z0-9][A-Z0-9:._/-]{0,31}$")


class WorkOrderError(ValueError):
    """A request the store refuses; the message names what was wrong."""


class WorkOrderNotFound(WorkOrderError):
    pass


class IllegalTransition(WorkOrderError):
    pass


class IsolationRequired(WorkOrderError):
    """The plant requires isolation (`IsolationRule`) and the move to in_progress did not confirm it."""


class ReportNotFound(WorkOrderNotFound):
    """No standing reported fix by that person on that run (never reported, or withdrawn)."""


class ReportConflict(IllegalTransition):
    """A confirmation its report does not allow: by the person who reported it."""


def check_confirmer(reporter: str, by: str) -> None:
    """Nobody vouches for their own report (names compared without case: "li wei" is "Li Wei")."""
    if by.casefold() == reporter.casefold():
        raise ReportConflict(f"{by!r} reported this fix: someone else confirms it")


class ChecklistConflict(IllegalTransition):
    """A tick the order's state or its recorded ticks do not allow: on a closed order, or a client_tick_id
    already applied with another step or state."""


def _blank_is_none(value: Any) -> Any:
    # Forms and MES payloads send "" for a field nobody filled in; that is "not recorded", not a value.
    if isinstance(value, str):
        try:
            return stored_text(value)
        except BlankText:
            return None
    return value


# Parts are counted (2 bearings) or measured (12.5 l of coolant); no repair takes more than this of one part.
MAX_PART_QUANTITY = 10_000
_JSON_KINDS = {bool: "true or false", str: "a string", list: "a list", dict: "an object"}


def _quantity(value: object) -> int | float:
    # Exactly a JSON number: lax validation would read true as 1 and "5" as 5, a client's bug recorded as a fact.
    if isinstance(value, bool) or not isinstance(value, int | float):
        given = _JSON_KINDS.get(type(value), f"a {type(value).__name__}")
        raise ValueError(f"quantity must be a number, not {given}")
    # NaN fails both comparisons; a huge int compares where math.isfinite would raise OverflowError.
    if not 0 < value <= MAX_PART_QUANTITY:
        raise ValueError(f"quantity must be a positive number, at most {MAX_PART_QUANTITY}")
    return value


PartQuantity = Annotated[
    int | float,
    PlainValidator(_quantity),
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": MAX_PART_QUANTITY}),
]


FixText = Annotated[Annotated[str, StringConstraints(max_length=2000)] | None, BeforeValidator(_blank_is_none)]


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid")

    part: Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(stored_text)] = Field(
        description="part number or name, e.g. 6205-2RS bearing"
    )
    quantity: PartQuantity | None = Field(
        default=None, description=f"e.g. 2, or 12.5 (litres); at most {MAX_PART_QUANTITY}"
    )

    def label(self) -> str:
        return f"{self.part} ×{self.quantity}" if self.quantity else self.part


class Fix(BaseModel):
    """What was found and done, recorded when an order is closed; every field may be left out."""

    model_config = ConfigDict(extra="forbid")

    cause: FixText = Field(default=None, description="what was found, e.g. coolant filter clogged")
    remedy: FixText = Field(default=None, description="what was done, e.g. replaced the filter, flushed the circuit")
    parts: list[Part] = Field(default_factory=list, max_length=50)
    note: FixText = None

    def is_empty(self) -> bool:
        return not (self.cause or self.remedy or self.parts or self.note)


def check_fix(status: str, fix: Fix | None) -> None:
    """A fix is recorded when an order closes; on any other move nothing has been fixed yet."""
    if fix is not None and not fix.is_empty() and status not in CLOSED_STATUSES:
        raise WorkOrderError(
            f"cause, remedy, parts and note are recorded when an order is closed "
            f"({' or '.join(CLOSED_STATUSES)}), not when it moves to {status}"
        )


# Unique across the plant, as a question's client_request_id: a tablet's random id, not a counter.
CLIENT_TICK_ID_PATTERN = r"^[A-Za-z0-9_.:-]{8,64}$"
# What a checklist step is: one of the plant's isolation steps or one of the manual entry's remedy steps.
STEP_KEY_PATTERN = r"^(isolation|step):[1-9][0-9]{0,2}$"


class RecordedReading(BaseModel):
    """A sensor reading kept on an order as it was read (the PLC tool's value, unit and quality): the
    zero-energy signal when isolation was confirmed, or the sensor a checklist step names."""

    model_config = ConfigDict(extra="forbid")

    device_id: str
    sensor: str
    label: str = ""
    value: float | None
    unit: str = ""
    quality: str
    source: str
    ts_ms: int | None = None


class IsolationConfirmation(BaseModel):
    """Who confirmed the device isolated (locked out, de-energised) when the order entered in_progress,
    and what its zero-energy signal read then, where the plant maps one."""

    model_config = ConfigDict(extra="forbid")

    by: PersonName
    reading: RecordedReading | None = None


class IsolationRule(BaseModel):
    """The plant's rule that an order enters in_progress only with its device's isolation confirmed, kept with
    the orders so that every process moving them enforces it, whatever its own config says; when it was
    turned on, and by what: a config's `[work_orders] require_isolation`, or a person with the CLI."""

    model_config = ConfigDict(extra="forbid")

    set_by: str
    set_at: str


class ChecklistTick(BaseModel):
    """One tick (or untick) of a step of the remedy on the tablet, in the order it was applied."""

    model_config = ConfigDict(extra="forbid")

    client_tick_id: str = Field(pattern=CLIENT_TICK_ID_PATTERN)
    step_key: str = Field(pattern=STEP_KEY_PATTERN, description="isolation:<n> or step:<n>, e.g. step:4")
    # As stored: the store checked them on the way in (`WorkOrderStore.tick`), and a tick kept under older
    # rules must still read back.
    text: str
    done: bool = Field(strict=True)
    by: str
    at: str  # when the service applied it
    ticked_at: str | None = None  # the tablet's clock when ticked, which differs from `at` for a tick queued offline
    reading: RecordedReading | None = None


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
    # Set when the order enters a closed status; the fix fields only if someone recorded them.
    closed_at: str | None = None
    closed_by: str | None = None
    cause: str | None = None
    remedy: str | None = None
    parts: list[Part] = []
    note: str | None = None
    # Set when the order entered in_progress with the device's isolation confirmed.
    isolation_confirmed_at: str | None = None
    isolation_confirmed_by: str | None = None
    isolation_reading: RecordedReading | None = None
    # The remedy's steps as ticked on the tablet, oldest first; a step's state is its latest tick.
    checklist: list[ChecklistTick] = []


class ReportedFix(BaseModel):
    """What a technician said fixed a fault, in feedback on an answer (no work order was closed for it): it
    joins a fault's past fixes beside closed orders' causes and remedies, as an unverified report until
    someone allowed to vouch for it (a supervisor, an operator on the box) confirms it."""

    model_config = ConfigDict(extra="forbid")

    # FB-<run id> for the first person to report on an answer, FB-<run id>-<n> for the n-th: each person's
    # report is their own, corrected or withdrawn only by them, and an id is never given to another report.
    id: str
    run_id: str
    device_id: str
    fault_code: str
    remedy: str
    closed_at: str  # when it was reported: the time past fixes are ordered by
    closed_by: str  # who reported it
    confirmed_at: str | None = None
    confirmed_by: str | None = None

    @property
    def confirmed(self) -> bool:
        return self.confirmed_by is not None


PastFix = WorkOrder | ReportedFix


@dataclass(frozen=True)
class FixHistory:
    """A fault's past on one machine: how it was fixed before, and how often it came back lately."""

    same_device: list[PastFix]  # done orders and reported fixes for this device and fault, newest first
    same_model: list[PastFix]  # the same fault on other machines of the same model, newest first
    recent_orders: int  # orders for this device and fault created within the window, whatever their status


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
    Field(
        max_length=64, description="fault code as printed on the HMI, e.g. E102, F03, 6065, ALARM:1", examples=["E102"]
    ),
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
