"""Running cases through the agent on the evaluation plant.

A case's earlier session questions run first, each with the summary of the
runs before it; then its fault (if any) is set, its question runs and is
scored. A run that raises is a failed case with the error, not a crashed
evaluation.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from edge.agent import Agent
from edge.config import Config
from edge.evaluation.cases import EvalCase
from edge.evaluation.plant import EvalPlant
from edge.evaluation.scoring import CaseScore, crashed_score, score_case
from edge.evaluation.summary import Summary, summarise
from edge.run import RunRecord, RunRequest, new_id, session_context

# Called with the scored run's request before it runs (the token report replays through it).
Prepare = Callable[[RunRequest], None]


class CaseReport(BaseModel):
    case: EvalCase
    session_runs: list[RunRecord] = Field(default_factory=list)
    record: RunRecord | None = None
    score: CaseScore
    error: str | None = None


class EvalReport(BaseModel):
    planner: str
    llm_url: str | None
    model: str | None
    index: str
    index_built: bool
    elapsed_s: float
    cases: list[CaseReport]
    summary: Summary


def _run_case(agent: Agent, plant: EvalPlant, case: EvalCase, prepare: Prepare | None = None) -> CaseReport:
    earlier: list[RunRecord] = []
    try:
        for question in case.session:
            earlier.append(agent.run(_request(case, question, earlier)))
        request = _request(case, case.question, earlier)
        with plant.fault(case.fault):
            if prepare is not None:
                prepare(request)
            record = agent.run(request)
    except Exception as exc:  # an engine or tool crash fails this case, the others still run
        error = f"{type(exc).__name__}: {exc}"
        return CaseReport(case=case, session_runs=earlier, score=crashed_score(case, error), error=error)
    return CaseReport(
        case=case, session_runs=earlier, record=record, score=score_case(case, record, plant.config.devices, earlier)
    )


def _run_cases(
    agent: Agent,
    plant: EvalPlant,
    cases: list[EvalCase],
    on_case: Callable[[CaseReport], None] | None = None,
    prepare: Prepare | None = None,
) -> list[CaseReport]:
    reports = []
    for case in cases:
        report = _run_case(agent, plant, case, prepare)
        reports.append(report)
        if on_case is not None:
            on_case(report)
    return reports


def evaluate(
    config: Config, cases: list[EvalCase], workdir: Path, on_case: Callable[[CaseReport], None] | None = None
) -> EvalReport:
    """Run `cases` on a fresh evaluation plant with the agent as configured (LLM if a URL is set, else rules)."""
    plant = EvalPlant(config, workdir)
    try:
        agent = Agent(plant.config)
        try:
            agent.warm()  # as the service does at start-up: no case meets a cold tool
            return evaluate_on(agent, plant, cases, on_case)
        finally:
            agent.close()
    finally:
        plant.close()


def evaluate_on(
    agent: Agent,
    plant: EvalPlant,
    cases: list[EvalCase],
    on_case: Callable[[CaseReport], None] | None = None,
    prepare: Prepare | None = None,
) -> EvalReport:
    started = time.perf_counter()
    reports = _run_cases(agent, plant, cases, on_case, prepare)
    return EvalReport(
        planner=agent.loop.planner.name,
        llm_url=agent.config.llm.url,
        model=agent.config.llm.model if agent.client is not None else None,
        index=str(plant.index_path),
        index_built=plant.index_built,
        elapsed_s=round(time.perf_counter() - started, 2),
        cases=reports,
        summary=summarise({report.case.id: report.score for report in reports}),
    )


def _request(case: EvalCase, question: str, earlier: list[RunRecord]) -> RunRequest:
    return RunRequest(
        question=question,
        device_id=case.device_id,
        session_id=f"eval-{case.id}",
        session=session_context(earlier),
        actor=case.actor,
        alarm=case.alarm,
        request_id=new_id("req"),
        run_id=new_id("run"),
    )


def fresh_ids(request: RunRequest) -> RunRequest:
    return dataclasses.replace(request, request_id=new_id("req"), run_id=new_id("run"))
