"""The tool contract: what every tool declares and what it hands back.

A tool is a synchronous callable with a name the model sees, a description
written for the model, a pydantic input model (its JSON Schema, with format
hints in the field descriptions, is what the model is constrained to), a
whitelist of output fields, a timeout and a side-effect flag. The registry
(`tools.registry`) validates arguments, enforces the timeout, filters the
output and wraps it in the observation envelope.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "not_found", "error", "degraded"]
ItemKind = Literal["text", "step", "ref", "safety"]
Actor = Literal["technician", "mes", "operator", "agent", "mcp"]


class Item(BaseModel):
    """One piece of tool output: prose (`text`), a remedy step (`step`), a
    pointer to evidence (`ref`: a manual page, a sensor reading, a work order)
    or a manual's hazard statement, quoted (`safety`: shown before the steps).

    `fields` holds structured values; the registry keeps only the tool's
    whitelisted names, so a vendor adding fields never breaks the model's input.
    """

    model_config = ConfigDict(extra="forbid")

    kind: ItemKind
    text: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)


class ToolOutput(BaseModel):
    """What a tool's `run` returns; the registry turns it into an Observation."""

    status: Status = "ok"
    items: list[Item] = Field(default_factory=list)
    source: str = ""
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    error_code: str | None = None
    suggestion: str | None = None

    @classmethod
    def error(cls, error_code: str, message: str, suggestion: str, source: str = "") -> ToolOutput:
        return cls(
            status="error",
            items=[Item(kind="text", text=message)],
            error_code=error_code,
            suggestion=suggestion,
            source=source,
            confidence=0.0,
        )


@dataclass(frozen=True)
class ToolContext:
    """Who is asking and where in the run we are; passed to every call."""

    request_id: str
    run_id: str
    loop_step: int
    actor: Actor = "technician"
    # Tablet flow: a side-effecting tool may park its action until a technician confirms.
    require_confirmation: bool = False
    confirmed: bool = False
    # MES alarms carry their own occurrence identity (event id, time) for idempotency.
    alarm: dict[str, Any] | None = None
    evidence: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    # The devices the request is about (those its question names, else the tablet's or the session's): a
    # side effect for another device is refused. Empty: not known (a CLI call, an MCP client).
    devices: tuple[str, ...] = ()
    # The technician said not to open a work order in this request.
    orders_declined: bool = False
    # A run's planner opens an order only on one of these: the codes a manual search of the run or of its
    # session listed for the device. None: not checked (an MES alarm names its own code, an MCP client).
    listed_codes: tuple[str, ...] | None = None


class Tool:
    """Base class for tools. Subclasses set the class attributes and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_model: ClassVar[type[BaseModel]]
    output_fields: ClassVar[frozenset[str]]
    # The subset of output_fields the model reads; None = all. The rest (titles, timestamps, scores)
    # are for people and the tablet app, and would only lengthen every later prompt.
    prompt_fields: ClassVar[frozenset[str] | None] = None
    timeout_s: ClassVar[float] = 2.0
    side_effect: ClassVar[bool] = False

    def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    def warm(self) -> None:
        """Load, blocking, whatever the tool loads lazily (a model, vectors); the service calls this in the
        background at start-up. Most tools have nothing to load."""

    def known_codes(self) -> set[str]:
        """The fault codes this tool knows of, so a bare number on an HMI is recognised as one; most know none."""
        return set()

    def close(self) -> None:
        """Release connections and files; the registry calls this when it shuts down."""

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        schema = cls.input_model.model_json_schema()
        schema.pop("title", None)
        return schema
