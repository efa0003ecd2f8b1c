"""The token and prefix report: what the real prompt costs per step and how much of it the prefix cache reuses.

Targets: the prompt at step 1 is at most 1,500 tokens (issue 19: a model with a
2,048-token context still has room for the run), and a typical 3-step task
stays within 4,096 tokens of context (the loop's token budget: the last
request's prompt plus its reply). The share of each later prompt that repeats
the previous one (reusable by the server's prefix cache) is reported as a
figure: it was a target (>= 90 %) while the system prompt alone was 3,300
tokens; a smaller prompt lowers the share and the work alike.

With an LLM URL configured the real model plans and the server counts the
tokens. Without one, a scripted OpenAI-compatible server on loopback replays
the rules planner's moves for each case as the model's replies, so the real
prompt is built over real tool results; that server estimates tokens at four
characters per token (Qwen2's tokenizer is not available offline), which
undercounts Chinese text.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from edge.agent import Agent, build_registry
from edge.config import Config
from edge.evaluation.cases import EvalCase
from edge.evaluation.plant import EvalPlant
from edge.evaluation.runner import CaseReport, EvalReport, evaluate_on, fresh_ids
from edge.llm.scripted_server import ScriptedLlmServer
from edge.run import RunRecord, RunRequest

_STEP1_TARGET = 1500
_CONTEXT_TARGET = 4096
_TYPICAL_STEPS = 3
_ESTIMATE_NOTE = (
    "tokens estimated by the scripted server at 4 characters per token: Qwen2's tokenizer is not "
    "available offline (Chinese text is undercounted)"
)


class StepTokens(BaseModel):
    n: int
    prompt_tokens: int
    completion_tokens: int
    shared_prefix_tokens: int
    prefix_share: float
    cached_tokens: int | None = None


class TaskTokens(BaseModel):
    case_id: str
    question: str
    steps: list[StepTokens]
    # The last request's prompt plus its reply: what the loop's token budget and the model's context hold.
    context_tokens: int
    # Every request's prompt and reply added up: what the server would compute without a prefix cache.
    processed_tokens: int
    # Only the prompt tokens that are not a repeated prefix, plus the replies: the work with the prefix cache.
    uncached_tokens: int
    min_prefix_share_from_step2: float | None


class TokenReport(BaseModel):
    source: str
    estimated: bool
    note: str
    tasks: list[TaskTokens]
    prefix_share_from_step2_min: float | None
    prefix_share_from_step2_mean: float | None
    typical_tasks: int
    typical_context_p50: float | None
    typical_context_max: int | None
    context_max: int
    processed_mean: float
    uncached_mean: float
    step1_prompt_max: int | None
    step1_target: int = _STEP1_TARGET
    context_target: int = _CONTEXT_TARGET
    step1_target_met: bool
    context_target_met: bool


def _task_tokens(case_id: str, record: RunRecord) -> TaskTokens:
    steps = [
        StepTokens(
            n=step.n,
            prompt_tokens=step.llm.prompt_tokens,
            completion_tokens=step.llm.completion_tokens,
            shared_prefix_tokens=step.llm.shared_prefix_tokens,
            prefix_share=round(step.llm.shared_prefix_tokens / max(step.llm.prompt_tokens, 1), 4),
            cached_tokens=step.llm.cached_tokens,
        )
        for step in record.steps
        if step.llm is not None
    ]
    later = [s.prefix_share for s in steps[1:]]
    return TaskTokens(
        case_id=case_id,
        question=record.question,
        steps=steps,
        context_tokens=record.context_tokens,
        processed_tokens=sum(s.prompt_tokens + s.completion_tokens for s in steps),
        uncached_tokens=sum(s.prompt_tokens - s.shared_prefix_tokens + s.completion_tokens for s in steps),
        min_prefix_share_from_step2=min(later) if later else None,
    )


def token_report(reports: list[CaseReport], source: str, estimated: bool) -> TokenReport:
    tasks = [
        _task_tokens(r.case.id, r.record)
        for r in reports
        if r.record is not None and any(step.llm is not None for step in r.record.steps)
    ]
    later = [s.prefix_share for task in tasks for s in task.steps[1:]]
    firsts = [task.steps[0].prompt_tokens for task in tasks if task.steps and task.steps[0].n == 1]
    typical = [task for task in tasks if len(task.steps) == _TYPICAL_STEPS]
    contexts = sorted(task.context_tokens for task in typical)
    return TokenReport(
        source=source,
        estimated=estimated,
        note=_ESTIMATE_NOTE if estimated else "tokens counted by the server",
        tasks=tasks,
        prefix_share_from_step2_min=min(later) if later else None,
        prefix_share_from_step2_mean=round(statistics.fmean(later), 4) if later else None,
        typical_tasks=len(typical),
        typical_context_p50=statistics.median(contexts) if contexts else None,
        typical_context_max=contexts[-1] if contexts else None,
        context_max=max((task.context_tokens for task in tasks), default=0),
        processed_mean=round(statistics.fmean(t.processed_tokens for t in tasks), 1) if tasks else 0.0,
        uncached_mean=round(statistics.fmean(t.uncached_tokens for t in tasks), 1) if tasks else 0.0,
        step1_prompt_max=max(firsts) if firsts else None,
        step1_target_met=bool(firsts) and max(firsts) <= _STEP1_TARGET,
        context_target_met=bool(contexts) and contexts[-1] <= _CONTEXT_TARGET,
    )


class _RulesReplay:
    """Plays the rules planner's moves for a request as a model's replies, over a scripted server."""

    def __init__(self, rules_agent: Agent):
        self._rules = rules_agent
        self._script: list[dict[str, Any]] = []
        self.server = ScriptedLlmServer(self._reply)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")
        return self._script[min(turn, len(self._script) - 1)]

    def prepare(self, request: RunRequest) -> None:
        self._script = _replies_of(self._rules.run(fresh_ids(request)))


def _replies_of(record: RunRecord) -> list[dict[str, Any]]:
    """A run's moves as the assistant messages a model would have written for them."""
    replies = [
        {"content": json.dumps({"thought": step.thought, "action": step.action, "args": step.args}, ensure_ascii=False)}
        for step in record.steps
        if step.action
    ]
    term = record.termination
    if term is not None:
        replies.append(
            {
                "content": json.dumps(
                    {
                        "thought": "I have what the tools returned.",
                        "final_answer": term.final_answer,
                        "evidence": term.supporting_observations,
                    },
                    ensure_ascii=False,
                )
            }
        )
    return replies


def measure_tokens(
    config: Config, cases: list[EvalCase], workdir: Path, on_case: Callable[[CaseReport], None] | None = None
) -> tuple[EvalReport, TokenReport]:
    """Run `cases` through the LLM planner with the real prompt: the configured model, else the rules replay."""
    plant = EvalPlant(config, workdir)
    registry = build_registry(plant.config)
    replay: _RulesReplay | None = None
    agents: list[Agent] = []
    try:
        agents.append(Agent(plant.config, registry))
        agents[0].warm()
        if plant.config.llm.url:
            agent = agents[0]
            report = evaluate_on(agent, plant, cases, on_case)
            return report, token_report(report.cases, f"LLM at {plant.config.llm.url}", estimated=False)
        replay = _RulesReplay(agents[0])
        replay.server.start()
        # The replay plays every step as the model's: the prompt's cost when the model plans them all.
        llm = plant.config.llm.model_copy(update={"url": replay.server.url, "planning": "model"})
        agent = Agent(plant.config.model_copy(update={"llm": llm}), registry)
        agents.append(agent)
        report = evaluate_on(agent, plant, cases, on_case, replay.prepare)
        return report, token_report(report.cases, "scripted server replaying the rules planner's moves", estimated=True)
    finally:
        if replay is not None:
            replay.server.stop()
        for agent in agents:
            agent.close()
        registry.close()
        plant.close()
