"""The rules planner: degraded mode without a language model.

It applies the prompt's tool trigger rules deterministically to what the
lexicon finds in the question, calls the same tools through the same loop,
and writes the final answer from the observations.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from edge.actions import FinalAnswer, ToolCall
from edge.answer import compose_answer, language_of, supporting_ids
from edge.planner import Decision, RunState, SessionContext
from knowledge.codes import code_key, lookup_keys
from tools.observation import Observation
from tools.plant import DeviceConfig

if TYPE_CHECKING:
    from edge.lexicon import Lexicon

MANUAL = "search_maintenance_manual_by_fault_code"
PLC = "read_plc_sensor_value"
WORK_ORDER = "generate_work_order"

# "degraded" manual results come from keyword search while the SBERT model warms: still answers.
ANSWERED = ("ok", "degraded")
MAX_CODES = 2
MAX_FOLLOW_UP_READINGS = 2

_LIVE = re.compile(r"\b(now|current(ly)?|right now|real[- ]?time|live|at the moment)\b|现在|当前|目前|实时", re.I)
_WORK_ORDER = re.compile(r"\b(work[- ]?orders?|dispatch|ticket|maintenance request)\b|工单|派单|报修", re.I)
_SYMPTOM = re.compile(
    r"\b(hot|overheat\w*|noise|noisy|leak\w*|vibrat\w*|shak\w*|smell\w*|smok\w*|stuck|slow|drops?|dropping|"
    r"won'?t|doesn'?t|does not|fails?|failing|stopp\w*|jam\w*|grind\w*|squeal\w*|alarm|too high|too low|"
    r"abnormal|rough|poor|bad|chatter\w*|wrong)\b"
    r"|过热|发热|很热|异响|噪音|泄漏|漏油|振动|抖动|冒烟|卡住|无法|不能|停机|报警|很大|很差|异常|过高|过低|太高|太低",
    re.I,
)


@dataclass(frozen=True)
class Intent:
    device_id: str | None
    codes: list[str]
    sensors: list[str]
    wants_live: bool
    wants_work_order: bool
    symptom: bool


class RulesPlanner:
    name = "rules"

    # Without a language model every answer is a degraded one, and says so.
    degraded = True

    def __init__(self, devices: dict[str, DeviceConfig], known_codes: Callable[[], Iterable[str]] = tuple):
        self._devices = devices
        self._known_codes = known_codes
        self._lexicon: Lexicon | None = None
        self._lexicon_lock = threading.Lock()

    def warm(self) -> None:
        """Build the lexicon and load its spaCy code linker now (the service does this in the background;
        importing spaCy would cost it a second of start-up)."""
        self.lexicon.warm()

    @property
    def lexicon(self) -> Lexicon:
        """Built on first use: cheap, without spaCy (the lexicon loads its code linker when text needs it)."""
        with self._lexicon_lock:
            if self._lexicon is None:
                from edge.lexicon import Lexicon

                self._lexicon = Lexicon(self._devices, self._known_codes())
            return self._lexicon

    def searches_by_symptom(self, question: str, device_id: str | None = None, actor: str = "technician",
                            session: SessionContext | None = None) -> bool:
        """Whether this question gets a symptom search of the manuals (the semantic search that needs
        the SBERT model); a fault-code or live-reading question does not."""
        state = RunState(question=question, device_id=device_id, session=session or SessionContext(), actor=actor)
        return self.analyse(state).symptom

    def analyse(self, state: RunState) -> Intent:
        found = self.lexicon.find(state.question)
        alarm = state.alarm or {}
        device_id = (alarm.get("device_id") or state.device_id or (found.devices[0] if found.devices else None)
                     or state.session.device_id)
        sensors = [sensor for owner, sensor in found.sensors if device_id is None or owner == device_id]
        # An alarm names its code; its text may hold none the lexicon can recognise (`K179A-0`, `OVERTEMP`).
        codes = [str(alarm["fault_code"])] if alarm.get("fault_code") else found.fault_codes[:MAX_CODES]
        # A sensor's own name ("vibration", "振动") is not a symptom: look for symptom words outside the entities.
        rest = "".join(" " if any(e.start_char <= i < e.end_char for e in found.entities) else ch
                       for i, ch in enumerate(state.question))
        wants_work_order = bool(_WORK_ORDER.search(state.question)) or state.actor == "mes"
        return Intent(
            device_id=device_id,
            codes=codes,
            sensors=list(dict.fromkeys(sensors)),
            wants_live=bool(_LIVE.search(state.question)),
            wants_work_order=wants_work_order,
            symptom=not codes and not (wants_work_order and state.session.fault_codes)
            and (not sensors or bool(_SYMPTOM.search(rest))),
        )

    def decide(self, state: RunState) -> Decision:
        intent = state.scratch.get("intent")
        if intent is None:
            intent = state.scratch["intent"] = self.analyse(state)
        done = {ToolCall("", step.action, step.args).key() for step in state.steps if step.action}
        for call in self._calls(intent, state):
            if call.key() not in done:
                return Decision(action=call)
        answer = compose_answer(state.question, state.observations, self.degraded, self.missing(intent, state))
        return Decision(action=FinalAnswer(thought="All triggered tools have answered.", text=answer,
                                           evidence=supporting_ids(state.observations)))

    def _calls(self, intent: Intent, state: RunState):
        device = {"device_id": intent.device_id} if intent.device_id else {}
        edition = {"language": "zh"} if language_of(state.question) == "zh" else {}
        for code in intent.codes:
            yield ToolCall(f"Fault code {code}: look it up in the manual first.", MANUAL,
                           {"fault_code": code, **device, **edition})
        if intent.symptom:
            yield ToolCall("A symptom without a code: search the manual by description.", MANUAL, {"query": state.question, **device})
        if intent.device_id:
            for sensor in intent.sensors or self._sensors_named_in_manual(intent.device_id, state.observations):
                yield ToolCall(f"Read {sensor} on {intent.device_id} live.", PLC, {"device_id": intent.device_id, "sensor": sensor})
        code = self._reported_code(intent, state)
        wants_order = intent.wants_work_order or (state.propose_work_order and bool(intent.codes))
        if wants_order and intent.device_id and code:
            thought = ("A work order is asked for and the fault is known." if intent.wants_work_order else
                       "A known fault on a known machine: propose a work order for the technician to confirm.")
            yield ToolCall(thought, WORK_ORDER,
                           {"device_id": intent.device_id, "fault_code": code, "summary": _summary(code, state)})

    def _sensors_named_in_manual(self, device_id: str, observations: list[Observation]) -> list[str]:
        """Sensors that the top manual result's steps point at: the live evidence a technician wants beside them."""
        text = " ".join(item.text for obs in observations if obs.tool == MANUAL and obs.status in ANSWERED
                        for item in obs.content if item.kind == "step")
        found = [sensor for owner, sensor in self.lexicon.find(text).sensors if owner == device_id]
        return list(dict.fromkeys(found))[:MAX_FOLLOW_UP_READINGS]

    def _reported_code(self, intent: Intent, state: RunState) -> str | None:
        """The fault a technician or the MES reported (now or earlier in the session), in the manual's
        spelling once the manual has answered ("报警号 6065" -> "6065"). A symptom search's best guess
        is not a reported fault: no work order is opened on it."""
        reported = intent.codes or state.session.fault_codes[-1:]
        if not reported:
            return None
        keys = set(lookup_keys(reported[0]))
        for obs in state.observations:
            if obs.tool == MANUAL and obs.status in ANSWERED:
                for item in obs.content:
                    code = item.fields.get("fault_code") if item.kind == "ref" else None
                    if code and code_key(str(code)) in keys:
                        return str(code)
        return reported[0]

    def missing(self, intent: Intent, state: RunState) -> list[str]:
        missing = []
        if (intent.sensors or intent.wants_live) and not intent.device_id:
            missing.append("live readings: which machine? known devices: " + ", ".join(self._devices))
        if intent.wants_work_order and not self._reported_code(intent, state):
            missing.append("work order: which fault code does the machine show?")
        return missing


def _summary(code: str, state: RunState) -> str:
    for obs in state.observations:
        for item in obs.content if obs.tool == MANUAL else ():
            if item.kind == "ref" and item.fields.get("fault_code") == code and item.fields.get("title"):
                return f"{code}: {item.fields['title']}. Reported: {state.question}"[:500]
    return f"{code}. Reported: {state.question}"[:500]
