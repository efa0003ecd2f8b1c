"""Who decides a run's steps: the rules where their trigger rules are certain, the language model where
it adds (a guess the rules would make, the answer's prose), and the routing probe that tells whether a
model plans worse than the rules. It sits above both planners, which never see each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from edge.planning.probe import ProbeCase, RoutingResult, probe_cases, routing_probe
    from edge.planning.rules_first import RulesFirstPlanner

_EXPORTS = {
    "ProbeCase": "edge.planning.probe",
    "RoutingResult": "edge.planning.probe",
    "RulesFirstPlanner": "edge.planning.rules_first",
    "probe_cases": "edge.planning.probe",
    "routing_probe": "edge.planning.probe",
}

__all__ = ["ProbeCase", "RoutingResult", "RulesFirstPlanner", "probe_cases", "routing_probe"]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
