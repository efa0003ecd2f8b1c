"""The gate every final answer passes before a technician reads it.

A planner's final answer is shown only if everything it states comes from
this run: each fault code, value, work-order id, manual and page is in an
observation (or was said by the technician, the session summary or the
plant's own names: `edge.run.grounding`), each sentence is said by an
observation item in so many words (`edge.run.sentence_support`), each cited
observation id exists, a claimed work order was created or found by a
work-order call, and a question that needs a tool result has at least one.
A model's answer is its prose section: each sentence that fails is not shown (`edge.run.prose`), and
an answer that fails as a whole (`structural_problems`) is not shown at all. An answer composed from the
observations (`edge.run.compose`) passes the
checks of its facts only: its own template words ("too little history for
a trend", "处理步骤") are no observation's, and measured it fails the
sentence check (scripts/bench_sentence_support.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from edge.run.grounding import WORK_ORDER_TOOL, collect_evidence, ungrounded
from edge.run.planner import RunState
from edge.run.prose import supporting
from edge.run.sentence_support import plant_vocabulary, sentence_problems
from tools.observation import Observation
from tools.plant import DeviceConfig

# A tool that answered, if only that it found nothing, is something to answer from; an error is not.
USABLE = ("ok", "degraded", "not_found")
# A sentence that says an order exists. A proposal ("confirm to create it", "请确认后创建") is not a claim.
_ORDER_WORD = re.compile(r"work[- ]?orders?|tickets?|工单", re.I)
_ORDER_DONE = re.compile(
    r"\b(created|opened|raised|submitted|dispatched|logged|is open|has been opened)\b"
    r"|已创建|创建了|已开|已派|已提交|已生成|已建立|已为[^。；]{0,40}创建",
    re.I,
)
_SENTENCE = re.compile(r"[^.!?。！？\n]+")
# "not created yet" says the opposite of a made order: a model that copies a pending order's status
# ("work order (not created yet) pending_confirmation") was refused as claiming one.
_NEGATED = re.compile(r"\b(?:not|never|no)\s+(?:\w+\s+)?$|n't\s+(?:\w+\s+)?$", re.I)

# Whether a question can be answered only from tool results (a fault code, a reading, a symptom, an order).
NeedsEvidence = Callable[[RunState], bool]


class AnswerVerifier:
    def __init__(self, devices: dict[str, DeviceConfig], needs_evidence: NeedsEvidence):
        self.devices = devices
        self._needs_evidence = needs_evidence
        self._vocabulary = plant_vocabulary(devices)

    def structural_problems(self, cited: Sequence[str], state: RunState) -> list[str]:
        """What makes a planner's answer unusable as a whole, whatever its sentences say."""
        problems: list[str] = []
        known = {obs.id for obs in state.observations}
        unknown = [e for e in cited if e not in known]
        if unknown:
            problems.append(f"cites observations that do not exist: {', '.join(unknown)}")
        if not any(obs.status in USABLE for obs in state.observations) and self._needs_evidence(state):
            problems.append("answers a question that needs a tool result without any usable observation")
        return problems

    def sentence_problems(self, sentence: str, state: RunState) -> list[str]:
        """What is wrong with one sentence of a planner's prose: facts the run does not back, words no
        trusted observation item says (`edge.run.prose.supporting`); [] = it may be shown."""
        observations = supporting(state.observations)
        told = [state.question, *state.session.summary]
        return self.unbacked(sentence, state, observations) + sentence_problems(
            sentence, observations, told, self._vocabulary
        )

    def unbacked(self, answer: str, state: RunState, observations: Sequence[Observation] | None = None) -> list[str]:
        """The facts in `answer` that this run's `observations` (all of them by default) do not back (the
        check an answer composed from the observations must pass too)."""
        observations = state.observations if observations is None else list(observations)
        problems: list[str] = []
        if claims_an_order(answer) and not _order_made(observations):
            problems.append("claims a work order that no work-order call created or found")
        evidence = collect_evidence(observations, state.question, self.devices, state.session.summary)
        problems.extend(f"not in any observation: {fact}" for fact in ungrounded(answer, evidence))
        return problems


def claims_an_order(answer: str) -> bool:
    return any(
        _ORDER_WORD.search(sentence)
        and any(not _NEGATED.search(sentence[: done.start()]) for done in _ORDER_DONE.finditer(sentence))
        for sentence in _SENTENCE.findall(answer)
    )


def _order_made(observations: Sequence[Observation]) -> bool:
    return any(
        obs.tool == WORK_ORDER_TOOL
        and obs.status == "ok"
        and any(item.fields.get("work_order_id") for item in obs.content)
        for obs in observations
    )
