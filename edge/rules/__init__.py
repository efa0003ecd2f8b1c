"""The rules planner: the run's planner without a language model. It reads the question with the plant's
lexicon (device names, sensor labels, fault-code shapes, value questions) and calls the tools in a fixed
order; it answers alone in degraded mode and takes over a run the model cannot finish.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from edge.rules.planner import RulesPlanner

_EXPORTS = {
    "RulesPlanner": "edge.rules.planner",
}

__all__ = [
    "RulesPlanner",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
