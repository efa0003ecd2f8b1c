"""Request and response bodies of the HTTP API (they make up /openapi.json)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from edge.run import Confirmation, Feedback, RunRecord
from tools.plant import Isolation
from tools.text_fields import PersonName, stored_text
from tools.work_orders.model import (
    CLIENT_TICK_ID_PATTERN,
    ISOLATING_STATUS,
    STEP_KEY_PATTERN,
    Fix,
    OrderStatus,
    WorkOrder,
    check_fix,
)

SESSION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"
# At least 8 characters: keys are unique across the plant, not per tablet, so a counter will not do.
CLIENT_REQUEST_ID_PATTERN = r"^[A-Za-z0-9_.:-]{8,64}$"


class AskBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(stored_text)] = Field(
        description="what the technician asks, in English or Chinese",
        examples=["Press-3 shows E102, what should I do?"],
    )
    device_id: str | None = Field(
        default=None, description="device id as configured, e.g. press-3; optional", examples=["press-3"]
    )
    session_id: str | None = Field(
        default=None,
        pattern=SESSION_ID_PATTERN,
        description="earlier runs of this session are summarised for follow-ups; "
        "omit to start a new session (its id comes back in X-Session-ID)",
    )
    client_request_id: str | None = Field(
        default=None,
        pattern=CLIENT_REQUEST_ID_PATTERN,
        description="idempotency key, unique across the plant (a random one: a UUID); optional. A POST repeating "
        "the key of an earlier one starts no new run: it streams the run that key started, from its first event "
        "(live, or replayed once stored), with that run's X-Run-ID and X-Session-ID. The same key with another "
        "question or device is refused (409)",
        examples=["lx3k9f2a-8c1e4b7d90af12c3"],
    )


class StatusChange(Fix):
    """A work order's next status; closing it (done, cancelled) may say what was found and done (`Fix`).
    The tablet's body (`POST /v1/work-orders/{id}/status`) as it is; the MES's adds the order's id."""

    status: OrderStatus = Field(
        description="the status to move to: acknowledged, in_progress, then done; or cancelled", examples=["done"]
    )
    isolation_confirmed: bool | None = Field(
        default=None,
        strict=True,
        description="with in_progress: the device is isolated (the plant's lock-out steps done); refused while "
        "its zero-energy signal reads energised or cannot be read. Required while the plant requires isolation "
        "(a rule kept with the work orders: `fixloop work-orders isolation-rule`)",
    )
    by: PersonName | None = Field(default=None, description="who confirmed the isolation: a name or badge number")

    @model_validator(mode="after")
    def _fix_only_when_closing(self) -> StatusChange:
        check_fix(self.status, self.fix())
        return self

    @model_validator(mode="after")
    def _isolation_when_starting(self) -> StatusChange:
        if self.isolation_confirmed is not None and self.status != ISOLATING_STATUS:
            raise ValueError(f"isolation_confirmed goes with the move to {ISOLATING_STATUS}, not to {self.status}")
        if self.isolation_confirmed and self.by is None:
            raise ValueError("isolation_confirmed needs by: the name of who isolated the device")
        return self

    def fix(self) -> Fix:
        return Fix.model_validate(self.model_dump(include=set(Fix.model_fields)))


class ChecklistTickBody(BaseModel):
    """A tick (or untick) of one step of the remedy shown on the tablet for the run's work order."""

    model_config = ConfigDict(extra="forbid")

    client_tick_id: str = Field(
        pattern=CLIENT_TICK_ID_PATTERN,
        description="idempotency key, unique across the plant (a random one); a tick sent again with it is applied "
        "once, and the same key with another step or state is refused (409)",
        examples=["lx3k9f2a-8c1e4b7d90af12c3"],
    )
    step_key: str = Field(
        pattern=STEP_KEY_PATTERN,
        description="which step: isolation:<n> (the plant's isolation steps) or step:<n> (the manual's)",
        examples=["step:4"],
    )
    text: Annotated[str, Field(min_length=1, max_length=500), AfterValidator(stored_text)] = Field(
        description="the step as shown", examples=["Read the motor temperature"]
    )
    done: bool = Field(strict=True, description="ticked (true) or unticked (false)")
    by: PersonName = Field(description="who ticked it: a name or badge number")
    ticked_at: AwareDatetime | None = Field(
        default=None, description="the tablet's time of the tick (a queued offline tick reaches the service later)"
    )
    sensor: str | None = Field(
        default=None,
        max_length=80,
        description="the sensor the step names (e.g. motor_temp): read through the PLC tool and kept with the tick",
    )


class TickResult(BaseModel):
    work_order: WorkOrder
    # False when this client_tick_id had been applied before: nothing changed.
    applied: bool


class SensorView(BaseModel):
    id: str
    label: str
    label_zh: str
    unit: str


class DeviceView(BaseModel):
    id: str
    name: str
    name_zh: str
    vendor: str
    model: str
    sensors: list[SensorView]
    # The plant's lock-out for the device: the tablet asks for it to be confirmed before the work starts.
    isolation: Isolation | None = None


class ToolView(BaseModel):
    name: str
    # What the tool is for, in the tablet's words (manual, plc, order); None for a tool it has no words for.
    role: str | None
    description: str
    side_effect: bool


class RunView(BaseModel):
    run_id: str
    running: bool
    record: RunRecord | None = None
    confirmations: list[Confirmation] = Field(default_factory=list)
    feedback: list[Feedback] = Field(default_factory=list)


class TakeoverResult(BaseModel):
    run_id: str
    # False when the run reached its own end before the takeover was seen.
    taken_over: bool
    stopped: bool
    pending_action: dict[str, Any] | None = None
    record: RunRecord | None = None


class ConfirmResult(BaseModel):
    run_id: str
    work_order: dict[str, Any]
    confirmation: Confirmation


class FeedbackBody(BaseModel):
    """A technician's word on an answer: helpful or not, and, if they know, what actually fixed it."""

    model_config = ConfigDict(extra="forbid")

    helpful: bool = Field(strict=True, description="whether the answer helped", examples=[False])
    fix: str | None = Field(
        default=None,
        max_length=2000,
        description="what actually fixed it, in the technician's words; on a run about one device and fault code "
        "it joins that fault's past fixes as an unverified report by `by` until a supervisor confirms it. "
        "Without it (null or empty) a fix this person reported on the answer before is withdrawn",
        examples=["the fan connector was loose; reseated it"],
    )
    by: PersonName = Field(
        default="technician",
        description="who gives it: a name or badge number, required with a `fix`; a second word from the same "
        "person replaces the first, never another person's",
    )

    @field_validator("fix")
    @classmethod
    def _fix_or_none(cls, value: str | None) -> str | None:
        # No fix (null or ""): withdraws the one this person reported before. Blank is a mistake, not a withdrawal.
        return stored_text(value) if value else None

    @model_validator(mode="after")
    def _fix_is_someones(self) -> FeedbackBody:
        # A fix is one person's report, beside anyone else's: an unnamed one would be everyone's "technician".
        if self.fix is not None and "by" not in self.model_fields_set:
            raise ValueError("by: name who reports the fix (a name or badge number); each person's fix is their own")
        return self


class WithdrawFixBody(BaseModel):
    """The reporter takes back the fix they reported on an answer; their word on whether it helped stays."""

    model_config = ConfigDict(extra="forbid")

    by: PersonName = Field(description="who reported the fix", examples=["Li Wei"])


class ConfirmFixBody(BaseModel):
    """A supervisor vouches for the fix a technician reported on an answer: from then on a recorded fix."""

    model_config = ConfigDict(extra="forbid")

    reporter: PersonName = Field(description="who reported the fix", examples=["Li Wei"])
    by: PersonName = Field(description="who confirms it", examples=["Chen Jing"])


class FeedbackResult(BaseModel):
    feedback: Feedback
    # The past fix the `fix` became (`FB-<run id>…`), when the run was about one device and fault code.
    reported_fix_id: str | None = None
