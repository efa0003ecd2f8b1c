"""Whether a request lets a work order be opened at all: the technician may say not to.

Shared by every planner's path (the work-order tool refuses, the rules planner proposes none), so "don't
open a ticket" means the same whoever plans.
"""

from __future__ import annotations

import re

_DECLINED = re.compile(
    r"\b(?:do not|don'?t|dont|no need to|never|without)\s+(?:\w+\s+){0,2}?(?:open|create|raise|file|log|make|book|"
    r"submit)\w*\s+(?:\w+\s+){0,2}?(?:work[- ]?orders?|tickets?|orders?|requests?)\b"
    r"|\bno (?:work[- ]?orders?|tickets?)(?: (?:please|needed|for now|required))?\s*(?:[,.;!]|$)"
    r"|(?:不要|别|不用|无需|不必|先别|暂时不要?)\S{0,4}?(?:(?:开|建|创建|提交|派|报)\S{0,2}?(?:工单|单)|报修|派单)",
    re.I,
)


def declines_order(question: str) -> bool:
    """The question says not to open a work order ("don't open a ticket", "不要开工单")."""
    return bool(_DECLINED.search(question))
