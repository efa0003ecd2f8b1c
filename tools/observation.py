"""The observation envelope: the one shape every tool result takes in a run."""

from __future__ import annotations

import json
import time
from typing import Any

from pydantic import BaseModel, Field

from tools.contract import Item, Status

TRUNCATION_MARKER = "[… {n} characters cut …]"
# The shortest a text is cut to in a rendered observation before its items are dropped altogether.
MIN_TEXT_CHARS = 60
NO_NEW_INFORMATION = "no new information: identical to the previous observation"


def now_ms() -> int:
    return int(time.time() * 1000)


class Observation(BaseModel):
    id: str
    request_id: str
    loop_step: int
    tool: str
    status: Status
    ts_ms: int = Field(default_factory=now_ms)
    source: str = ""
    confidence: float = 1.0
    content: list[Item] = Field(default_factory=list)
    error_code: str | None = None
    suggestion: str | None = None
    truncated: bool = False
    no_new_information: bool = False
    dropped_fields: list[str] = Field(default_factory=list)
    prompt_fields: list[str] | None = None
    elapsed_ms: float = 0.0

    def payload(self) -> dict[str, Any]:
        """What the model sees: the envelope without bookkeeping fields."""
        data: dict[str, Any] = {
            "id": self.id,
            "tool": self.tool,
            "status": self.status,
            "source": self.source,
            "confidence": round(self.confidence, 3),
            "content": _content_payload(self.content, self.prompt_fields),
        }
        if self.error_code:
            data["error_code"] = self.error_code
        if self.suggestion:
            data["suggestion"] = self.suggestion
        if self.no_new_information:
            data["note"] = NO_NEW_INFORMATION
        return data

    def payload_json(self) -> str:
        return _compact(self.payload())

    def render(self, max_chars: int) -> str:
        """Compact JSON for the prompt, within `max_chars` and always valid JSON (a model reading a cut
        object guesses at the rest). Beyond the limit whole items go from the end, the first ones (code,
        title, reading) stay, and `omitted_items` says how many went; an item still too long on its own
        has its long texts cut in the middle. Marked `truncated`."""
        payload = self.payload()
        full = _compact(payload)
        self.truncated = len(full) > max_chars
        if not self.truncated:
            return full
        items = payload["content"]
        kept = list(items)
        while len(kept) > 1 and len(_compact(_with_items(payload, kept, len(items)))) > max_chars:
            kept.pop()
        text_limit = max_chars
        while True:
            shorter = _with_items(payload, [_cut_texts(item, text_limit) for item in kept], len(items))
            if "suggestion" in shorter:
                shorter["suggestion"] = cut_middle(shorter["suggestion"], max(text_limit, MIN_TEXT_CHARS))
            rendered = _compact(shorter)
            if len(rendered) <= max_chars:
                return rendered
            if not kept:
                return rendered  # the envelope alone, every text at its shortest
            if text_limit <= MIN_TEXT_CHARS:
                kept = []
            text_limit = max(text_limit // 2, MIN_TEXT_CHARS)

    def fingerprint(self) -> str:
        """Identity of what the model reads, ignoring the observation's id and time."""
        return json.dumps(
            {
                "tool": self.tool,
                "status": self.status,
                "content": _content_payload(self.content, self.prompt_fields),
                "error_code": self.error_code,
            },
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )


def _content_payload(items: list[Item], prompt_fields: list[str] | None) -> list[dict[str, Any]]:
    """Compact for the prompt, so it grows as little as possible per step: a ref's fields stand for
    its prose, empty fields go, and a step leaves out what it shares with its ref (manual, page)."""
    payload = []
    context: dict[str, Any] = {}
    for item in items:
        data: dict[str, Any] = {"kind": item.kind}
        if item.text and not (item.kind == "ref" and item.fields):
            data["text"] = item.text
        for key, value in item.fields.items():
            if prompt_fields is not None and key not in prompt_fields:
                continue
            if value is None or value == "" or value == [] or (item.kind == "step" and context.get(key) == value):
                continue
            data[key] = value
        if item.kind == "ref":
            context = item.fields
        payload.append(data)
    return payload


def cut_middle(text: str, max_chars: int) -> str:
    """Keep the head and the tail: codes and titles lead, the last steps close."""
    if len(text) <= max_chars:
        return text
    marker_budget = len(TRUNCATION_MARKER.format(n=len(text)))
    keep = max(max_chars - marker_budget, 2)
    head = keep * 2 // 3
    tail = keep - head
    cut = len(text) - head - tail
    return text[:head] + TRUNCATION_MARKER.format(n=cut) + text[len(text) - tail :]


def _compact(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)


def _with_items(payload: dict[str, Any], kept: list[dict[str, Any]], total: int) -> dict[str, Any]:
    shorter = {**payload, "content": kept}
    if len(kept) < total:
        shorter["omitted_items"] = total - len(kept)
    return shorter


def _cut_texts(item: dict[str, Any], limit: int) -> dict[str, Any]:
    return {key: cut_middle(value, limit) if isinstance(value, str) else value for key, value in item.items()}
