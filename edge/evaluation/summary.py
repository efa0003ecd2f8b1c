"""The summary of an evaluation run, and its comparison with a recorded baseline."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from pydantic import BaseModel, Field

from edge.evaluation.scoring import METRICS, CaseScore

# Rates are compared with this slack so that a float round-trip through JSON never reads as a regression.
_EPSILON = 1e-9


class MetricSummary(BaseModel):
    passed: int
    applicable: int
    rate: float | None


class Summary(BaseModel):
    cases: int
    planners: list[str]
    metrics: dict[str, MetricSummary]
    steps_mean: float
    steps_max: int
    tokens_mean: float
    tokens_max: int
    context_tokens_max: int
    latency_p50_ms: float
    latency_p95_ms: float
    latency_max_ms: float
    failed: list[str] = Field(default_factory=list)

    def rates(self) -> dict[str, float]:
        return {name: m.rate for name, m in self.metrics.items() if m.rate is not None}


class Baseline(BaseModel):
    planner: str
    cases: int
    scores: dict[str, float]
    passed_cases: list[str]


def summarise(scores: dict[str, CaseScore]) -> Summary:
    values = list(scores.values())
    metrics = {}
    for name in METRICS:
        applicable = [getattr(s, name) for s in values if getattr(s, name) is not None]
        passed = sum(1 for v in applicable if v)
        metrics[name] = MetricSummary(
            passed=passed, applicable=len(applicable), rate=round(passed / len(applicable), 4) if applicable else None
        )
    latencies = sorted(s.latency_ms for s in values) or [0.0]
    return Summary(
        cases=len(values),
        planners=sorted({s.planner for s in values}),
        metrics=metrics,
        steps_mean=round(statistics.fmean(s.steps for s in values), 2) if values else 0.0,
        steps_max=max((s.steps for s in values), default=0),
        tokens_mean=round(statistics.fmean(s.tokens for s in values), 1) if values else 0.0,
        tokens_max=max((s.tokens for s in values), default=0),
        context_tokens_max=max((s.context_tokens for s in values), default=0),
        latency_p50_ms=round(_percentile(latencies, 50), 1),
        latency_p95_ms=round(_percentile(latencies, 95), 1),
        latency_max_ms=round(latencies[-1], 1),
        failed=[case_id for case_id, s in scores.items() if not s.passed],
    )


def baseline_of(summary: Summary, scores: dict[str, CaseScore]) -> Baseline:
    return Baseline(
        planner="+".join(summary.planners),
        cases=summary.cases,
        scores=summary.rates(),
        passed_cases=[case_id for case_id, s in scores.items() if s.passed],
    )


def load_baseline(path: str | Path) -> Baseline:
    try:
        return Baseline.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ValueError(f"baseline file not found: {path}") from None
    except (json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"baseline file {path} is not a baseline: {exc}") from None


def regressions(summary: Summary, baseline: Baseline) -> list[str]:
    """Every score below its baseline, with the cases that passed then and fail now."""
    rates = summary.rates()
    found = []
    for name, floor in baseline.scores.items():
        rate = rates.get(name)
        if rate is None or rate < floor - _EPSILON:
            got = "not measured" if rate is None else f"{rate:.1%}"
            found.append(f"{name}: {got} is below the baseline {floor:.1%}")
    if found:
        newly_failing = sorted(set(baseline.passed_cases) & set(summary.failed))
        if newly_failing:
            found.append("cases that passed in the baseline and fail now: " + ", ".join(newly_failing))
    return found


def _percentile(sorted_values: list[float], q: float) -> float:
    if len(sorted_values) == 1:
        return sorted_values[0]
    return statistics.quantiles(sorted_values, n=100, method="inclusive")[int(q) - 1]
