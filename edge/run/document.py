"""The answer as a typed document: what a technician reads, section by section, each with its source.

Code builds every section from the run's observations (`edge.run.compose`); a planner adds only its
`prose`, and a model's prose is checked sentence by sentence before it joins (`edge.run.prose`). The
service, the tablet, the CLI, MCP and the MES payload render this one document; plain text is one of its
renderings (`edge.run.render`), and the run record stores it.

Every voice is labelled by where it came from (`Source`), so a reader, and the checks, can trust each
accordingly: the manual and the plant's configuration, a live or a cached reading, a fix recorded on a
closed order, a technician's unverified report, the rules, the model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Source = Literal[
    "manual",  # a vendor manual's page
    "plant",  # the plant's own configuration (lock-out steps, limits, zero-energy rule)
    "live_reading",  # read from the PLC during this run
    "cached_reading",  # the PLC did not answer: the last cached value
    "recorded_fix",  # cause and remedy recorded when an order was closed by a role allowed to close it
    "unverified_report",  # a technician's feedback, not confirmed by anyone allowed to close orders
    "work_order_tool",  # an order this run created, found or proposed
    "rules",  # the rules planner's own words (from the phrase table)
    "model",  # the language model's prose, checked sentence by sentence
]

# How a reading stands against the plant's limits; one word for code, a sentence for the technician.
Verdict = Literal["within_limits", "past_high_alarm", "past_low_alarm", "suspect", "no_value"]

# Who planned and answered: the mode line says so honestly.
Mode = Literal[
    "model",  # the language model planned and wrote the prose
    "no_model",  # no language model is configured: the rules planner answers
    "model_unavailable",  # the model could not be reached (down, timing out, breaker open)
    "handed_over",  # the model ran and handed the run to the rules planner (why: `mode_reason`)
    "rules_first",  # the model plans worse than the rules here: it writes the prose only
]


class Cited(BaseModel):
    """Where a section's words come from: the observation that returned them, and the manual page."""

    source: Source
    observation: str | None = None
    manual: str | None = None
    version: str | None = None
    page: int | str | None = None


class SafetyStatement(BaseModel):
    signal_word: str  # danger / warning / caution, as the manual prints it
    text: str
    cited: Cited


class IsolationStep(BaseModel):
    n: int
    text: str
    device_id: str
    energy_sources: list[str] = Field(default_factory=list)
    cited: Cited


class Cause(BaseModel):
    text: str
    # Each piece of evidence said in the answer's language: a reading for or against, a past order's cause.
    evidence: list[str] = Field(default_factory=list)


class FaultEntry(BaseModel):
    code: str
    title: str
    kind: Literal["entry", "page"] = "entry"  # a structured entry, or a page quoted as found
    snippet: str = ""
    ocr: bool = False
    scope: str | None = None
    applies_to_device: bool | None = None
    causes: list[Cause] = Field(default_factory=list)
    causes_by_evidence: bool = False
    steps: list[str] = Field(default_factory=list)
    cited: Cited

    @property
    def heading(self) -> str:
        """A troubleshooting table keyed by symptom gives entries without a code: their symptom is the heading."""
        return f"{self.code} — {self.title}" if self.code else self.title


class Reading(BaseModel):
    device_id: str
    sensor: str
    label: str
    value: float | None
    unit: str = ""
    alarm_low: float | None = None
    alarm_high: float | None = None
    plausible_range: tuple[float, float] | None = None
    verdict: Verdict
    # The verdict in the answer's language, with the limits it was judged by.
    verdict_text: str
    # The OPC UA status of the value (signal quality, not a judgement of the machine).
    quality: str = ""
    timestamp: str | None = None
    age_s: float | None = None
    trend: str | None = None
    text: str = ""  # the tool's own sentence, kept for the record
    cited: Cited


class SafetyJudgement(BaseModel):
    """The plant's zero-energy rule applied to a reading, for a question whether something is safe to do."""

    device_id: str
    sensor: str
    safe: bool | None  # None: no usable value, so it cannot be confirmed
    text: str
    cited: Cited


class WorkOrderSection(BaseModel):
    id: str | None
    device_id: str
    code: str
    priority: str | None = None
    status: str
    kind: Literal["created", "existing", "proposed"]
    cited: Cited


class PastFix(BaseModel):
    id: str
    device_id: str | None = None
    same_device: bool | None = None
    date: str = ""
    cause: str | None = None
    remedy: str | None = None
    parts: list[str] = Field(default_factory=list)
    reported_by: str | None = None
    cited: Cited  # recorded_fix or unverified_report


class RejectedSentence(BaseModel):
    text: str
    reasons: list[str]


class Prose(BaseModel):
    """A planner's own words: the sentences shown, and those refused with why (kept for review)."""

    source: Source
    sentences: list[str] = Field(default_factory=list)
    rejected: list[RejectedSentence] = Field(default_factory=list)


class AnswerDocument(BaseModel):
    language: Literal["en", "zh"] = "en"
    mode: Mode = "model"
    # Why the model did not answer (a `FallbackReason`, or the server's error), said in the mode line.
    mode_reason: str | None = None
    notices: list[str] = Field(default_factory=list)  # the loop's own (a model answer not shown, a device read as)
    safety: list[SafetyStatement] = Field(default_factory=list)
    judgements: list[SafetyJudgement] = Field(default_factory=list)
    prose: Prose | None = None
    entries: list[FaultEntry] = Field(default_factory=list)
    isolation: list[IsolationStep] = Field(default_factory=list)
    readings: list[Reading] = Field(default_factory=list)
    work_orders: list[WorkOrderSection] = Field(default_factory=list)
    past_fixes: list[PastFix] = Field(default_factory=list)
    # What else the tools said, in the answer's language: not found, a failed call, a root-cause hint.
    other: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # the rules planner's words instead of a tool result
    missing: list[str] = Field(default_factory=list)
    text: str = ""  # the plain-text rendering, as shown
