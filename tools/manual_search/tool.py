"""`search_maintenance_manual_by_fault_code`: what a code means on this machine and what to do.

Exact code lookups answer from SQLite alone. Symptom queries need the SBERT
model; until it has loaded (`warm()`), they are answered by keyword search
and marked `degraded`, so a cold start never makes the loop wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from knowledge.ingest.safety import for_entry
from knowledge.models import Hit, SafetyStatement, Scope, SearchResult
from knowledge.search import IndexMissing, ManualIndex
from tools import plant
from tools.contract import Item, Tool, ToolContext, ToolOutput
from tools.manual_search.isolation import isolation_items
from tools.plant import DeviceConfig, find_device, unknown_device

SYMPTOM_HITS = 3
CODE_HITS = 3
OCR_CONFIDENCE = 0.6


class ManualSearchInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fault_code: str | None = Field(
        default=None,
        max_length=40,
        examples=["E102"],
        description="fault code as printed on the HMI, e.g. E102, F03, 6065, ALARM:1, Err-07, XX204, DRV_FAULT",
    )
    query: str | None = Field(
        default=None,
        max_length=300,
        examples=["the motor is hot"],
        description="symptom in the technician's words, when no code is shown, e.g. 'the motor is hot'",
    )
    device_id: str | None = Field(
        default=None,
        max_length=64,
        description="device id from the plant list, e.g. press-3: the code's meaning on that machine",
    )
    language: Literal["en", "zh"] | None = Field(
        default=None,
        description="manual edition: zh for a Chinese question, else en",
    )
    manual_version: str | None = Field(
        default=None,
        max_length=16,
        description="manual version, e.g. V1.2; leave out for the newest",
    )

    @field_validator("fault_code", "query", "device_id", "manual_version")
    @classmethod
    def _blank_is_missing(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _one_of(self) -> ManualSearchInput:
        if (self.fault_code is None) == (self.query is None):
            raise ValueError("give exactly one of fault_code (the code on the HMI) or query (the symptom)")
        return self


class ManualSearchTool(Tool):
    name = "search_maintenance_manual_by_fault_code"
    description = (
        "Look up a fault code (or, without a code, a symptom) in the plant's maintenance manuals. "
        "Returns the code's meaning for the device, its cause and the numbered remedy steps, "
        "the manual's safety statements for that work (give them first), "
        "with manual file, page and version to cite."
    )
    input_model = ManualSearchInput
    output_fields = frozenset(
        {
            "fault_code",
            "title",
            "manual",
            "manual_title",
            "version",
            "version_compatibility",
            "page",
            "score",
            "match",
            "vendor",
            "model",
            "scope",
            "applies_to_device",
            "cause",
            "symptom",
            "n",
            "language",
            "kind",
            "snippet",
            "ocr",
            "manual_id",
            "signal_word",
            "label",
            "applies",
            "electrical",
            # The plant's isolation steps (tools.manual_search.isolation).
            "isolation_step",
            "device_id",
            "energy_sources",
            "source",
        }
    )
    prompt_fields = frozenset(
        {
            "fault_code",
            "title",
            "manual",
            "version",
            "version_compatibility",
            "page",
            "match",
            "scope",
            "applies_to_device",
            "cause",
            "n",
            "kind",
            "snippet",
            "ocr",
            "signal_word",
            "isolation_step",
        }
    )
    timeout_s = 2.0

    def __init__(
        self,
        index_path: Path,
        devices: dict[str, DeviceConfig],
        model_path: str | None,
        semantic_languages: tuple[str, ...] = ("en",),
        second_opinion: bool = False,
    ):
        self._index = ManualIndex(
            Path(index_path),
            model_path=model_path,
            semantic_languages=tuple(semantic_languages),
            second_opinion=second_opinion,
        )
        self._devices = devices
        self._warming: threading.Thread | None = None
        self._warm_lock = threading.Lock()
        self._closed = False

    @property
    def semantic_ready(self) -> bool:
        """Whether symptom queries get semantic search now (else keyword search, marked degraded)."""
        return self._index.semantic_ready

    def warm(self) -> None:
        """Load the question encoder and the vectors (blocking); the service calls this in the background."""
        self._index.warm()

    def known_codes(self) -> set[str]:
        """The codes the manuals know, so a bare number on an HMI ("shows 6065") is recognised as one."""
        return self._index.codes()

    def close(self) -> None:
        self._closed = True
        self._index.close()

    def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutput:
        assert isinstance(args, ManualSearchInput)  # the registry validated args against input_model
        scope = Scope()
        device: DeviceConfig | None = None
        if args.device_id is not None:
            device_id = find_device(self._devices, args.device_id)
            if device_id is None:
                return unknown_device(self._devices, args.device_id, self.name)
            device = self._devices[device_id]
            scope = plant.scope(device)
        degraded = False
        try:
            if args.fault_code is not None:
                result = self._index.lookup(
                    args.fault_code, scope, args.manual_version, language=args.language, k=CODE_HITS
                )
            else:
                assert args.query is not None  # ManualSearchInput._one_of: no fault code means a symptom
                if self.semantic_ready:
                    result = self._index.query(args.query, scope, args.manual_version, k=SYMPTOM_HITS)
                else:
                    self._warm_in_background()
                    degraded = True
                    result = self._index.search(args.query, scope, args.manual_version, k=SYMPTOM_HITS, mode="lexical")
        except IndexMissing as exc:
            return ToolOutput.error(
                "index_missing",
                str(exc),
                "Answer without the manuals and say so; an operator must build the manual index.",
                source=self.name,
            )
        return _output(result, degraded, self._index.safety, device, args.language)

    def _warm_in_background(self) -> None:
        with self._warm_lock:
            if self._warming is None or not self._warming.is_alive():
                self._warming = threading.Thread(
                    target=self._warm_unless_closed, name="manual-search-warm", daemon=True
                )
                self._warming.start()

    def _warm_unless_closed(self) -> None:
        """Warming started by a run may outlive the tool (a one-shot command closes it at once): its
        failure on the closed index is no error then."""
        try:
            self.warm()
        except Exception:
            if not self._closed:
                raise


def _output(
    result: SearchResult,
    degraded: bool,
    safety: Callable[[str], list[SafetyStatement]],
    device: DeviceConfig | None = None,
    language: str | None = None,
) -> ToolOutput:
    """`safety`: a manual's hazard statements by its id; `device`: the machine asked about, whose isolation
    steps come before a hands-on remedy's steps (once, with the first entry that applies to it)."""
    # Only other machines' manuals hold it: not found for this machine, and said where it is listed;
    # another machine's steps are no procedure for this one.
    elsewhere = device is not None and bool(result.hits) and all(h.applies_to_device is False for h in result.hits)
    if result.status == "not_found" or elsewhere:
        message = result.message or f"Nothing in the manuals of {device.name if device else 'this machine'}."
        return ToolOutput(
            status="not_found",
            items=[Item(kind="text", text=message)],
            suggestion=result.suggestion,
            confidence=0.0,
            source="manuals",
        )
    items: list[Item] = []
    isolated = False
    if result.message:
        items.append(Item(kind="text", text=result.message))
    for rank, hit in enumerate(result.hits):
        items.append(_ref(hit))
        if hit.match == "exact" or rank == 0:  # steps of the best symptom match only: the rest are candidates
            # The hazards of doing the work come before the work.
            if hit.kind == "entry":
                items.extend(_safety(hit, s) for s in for_entry(safety(hit.manual_sha256), hit.fault_code, hit.steps))
                applies = not isolated and hit.applies_to_device is not False
                lockout = isolation_items(device, hit.steps, language) if applies else []
                items.extend(lockout)
                isolated = isolated or bool(lockout)
            items.extend(
                Item(
                    kind="step",
                    text=step,
                    fields={"n": n, "page": hit.page, "manual": hit.manual, "version": hit.version},
                )
                for n, step in enumerate(hit.steps, 1)
            )
    top = result.hits[0]
    confidence = top.score if top.applies_to_device is not False else min(top.score, 0.5)
    if top.ocr:  # text read from a scan: a letter may be wrong
        confidence *= OCR_CONFIDENCE
    suggestion = result.suggestion
    if degraded:
        suggestion = "Semantic search is still loading: these are keyword matches only; confirm with the fault code."
    return ToolOutput(
        status="degraded" if degraded else "ok",
        items=items,
        confidence=confidence,
        suggestion=suggestion,
        source=f"{top.manual} p.{top.page}",
    )


def _safety(hit: Hit, statement: SafetyStatement) -> Item:
    """A statement quoted as printed, cited like a step: its manual, page and the entry it goes with."""
    return Item(
        kind="safety",
        text=statement.text,
        fields={
            "signal_word": statement.signal_word,
            "label": statement.label,
            "applies": "general" if statement.general else "entry",
            "electrical": statement.electrical,
            "fault_code": hit.fault_code,
            "manual": hit.manual,
            "version": hit.version,
            "page": statement.page,
            "manual_id": hit.manual_sha256,
        },
    )


def _ref(hit: Hit) -> Item:
    if hit.kind != "entry":
        what = f"page text: {hit.snippet}"
    else:  # an entry of a table keyed by symptom has no code: its symptom is its title
        what = f"{hit.fault_code} — {hit.title}" if hit.fault_code else hit.title
    return Item(
        kind="ref",
        text=f"{what} ({hit.scope}; {hit.manual}, p. {hit.page}, {hit.version}{', OCR' if hit.ocr else ''})",
        fields={
            "fault_code": hit.fault_code,
            "title": hit.title,
            "manual": hit.manual,
            "manual_title": hit.manual_title,
            "version": hit.version,
            "version_compatibility": hit.version_compatibility,
            "page": hit.page,
            "score": hit.score,
            "match": hit.match,
            "vendor": hit.vendor,
            "model": hit.model,
            "scope": hit.scope,
            "applies_to_device": hit.applies_to_device,
            "cause": hit.cause,
            "symptom": hit.symptom,
            "language": hit.language,
            "kind": hit.kind,
            "snippet": hit.snippet,
            "ocr": hit.ocr,
            # The manual's id in the index: with page (and fault_code for an entry) the app shows the page.
            "manual_id": hit.manual_sha256,
        },
    )
