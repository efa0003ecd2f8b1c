"""Which tool output may back what a planner says: text from tools and stored records is data, not instructions.

Two kinds of item never support a sentence: a technician's unverified report (anyone with a tablet can
post one; it says what someone believes fixed it, not what anyone checked), and text that talks to the
planner instead of about the machine ("ignore previous instructions…", "you are now…"), wherever it was
stored: a model that echoes it must not find its echo supported.
"""

from __future__ import annotations

import re
from typing import Any

from tools.contract import Item

UNVERIFIED = "unverified_report"
_INSTRUCTION_LIKE = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:instructions?|rules?|prompt|above|previous|prior)\b"
    r"|\bsystem prompt\b|\byou are now\b|\bnew instructions?\b|\bas an ai\b|\b(?:assistant|system)\s*:"
    r"|<\|im_(?:start|end)\|>|\[/?inst\]"
    r"|(?:忽略|无视|忘记)[^。\n]{0,12}(?:指令|说明|规则|提示)|系统提示",
    re.I,
)


def instruction_like(text: str) -> bool:
    return bool(_INSTRUCTION_LIKE.search(text))


def unverified_report(fields: dict[str, Any]) -> bool:
    """A past fix from a technician's feedback that nobody allowed to close orders has confirmed (records
    from before provenance was stored: every `FB-` fix)."""
    provenance = fields.get("provenance")
    return provenance == UNVERIFIED or (
        provenance is None and str(fields.get("past_work_order_id", "")).startswith("FB-")
    )


def may_support(item: Item) -> bool:
    """Whether an observation item's words may back a planner's sentence."""
    if unverified_report(item.fields):
        return False
    texts = [item.text, *(str(v) for v in item.fields.values() if isinstance(v, str))]
    return not any(instruction_like(text) for text in texts)
