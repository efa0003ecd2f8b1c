"""The rules planner: degraded mode without a language model.

It applies the prompt's tool trigger rules deterministically to what the
lexicon finds in the question, calls the same tools through the same loop,
and writes the final answer from the observations.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge.rules.value_questions import (
    asks_every,
    asks_for_value,
    asks_other,
    blank_out,
    refers_back,
    sensors_asked,
    value_phrase_spans,
)
from edge.run import (
    PHRASES,
    Decision,
    FinalAnswer,
    RunState,
    SessionContext,
    ToolCall,
    asks_if_safe,
    build_document,
    language_of,
    render_text,
    supporting_ids,
)
from knowledge.codes import code_key, lookup_keys
from knowledge.glossary import concepts as glossary_concepts
from knowledge.glossary import written_form
from tools.manual_search.tool import ManualSearchInput, ManualSearchTool
from tools.observation import Observation
from tools.plant import DeviceConfig
from tools.plc.tool import PlcReadTool
from tools.work_orders.tool import WorkOrderTool

if TYPE_CHECKING:
    from edge.rules.lexicon import Lexicon

_MANUAL = ManualSearchTool.name
_PLC = PlcReadTool.name
_WORK_ORDER = WorkOrderTool.name

# "degraded" manual results come from keyword search while the SBERT model warms: still answers.
_ANSWERED = ("ok", "degraded")
_MAX_CODES = 2
_MAX_FOLLOW_UP_READINGS = 2
# The manual tool refuses a longer symptom query; a longer question is cut down to its symptom.
QUERY_MAX_CHARS = next(
    rule.max_length for rule in ManualSearchInput.model_fields["query"].metadata if getattr(rule, "max_length", None)
)

_LIVE = re.compile(r"\b(now|current(ly)?|right now|real[- ]?time|live|at the moment)\b|现在|当前|目前|实时", re.I)
_WORK_ORDER_WORDS = re.compile(r"\b(work[- ]?orders?|dispatch|ticket|maintenance request)\b|工单|派单|报修", re.I)
_SYMPTOM = re.compile(
    r"\b(hot|overheat\w*|noise|noisy|leak\w*|vibrat\w*|shak\w*|smell\w*|smok\w*|stuck|slow|drops?|dropping|"
    r"won'?t|doesn'?t|does not|fails?|failing|stopp\w*|jam\w*|grind\w*|squeal\w*|alarm|too high|too low|"
    r"abnormal|rough|poor|bad|chatter\w*|wrong)\b"
    r"|过热|发热|很热|异响|噪音|泄漏|漏油|振动|抖动|冒烟|卡住|无法|不能|停机|报警|很大|很差|异常|过高|过低|太高|太低|慢"
    # What the machine fails to do, as said aloud: 启动不了, 转不起来, 降不下来, 喷不出来, 没反应.
    r"|不(?:了|起来|下来|上来|出来|下去|上去|过去|进去|动|住|转)|没反应|没动静",
    re.I,
)
_CONTENT = re.compile(r"[^\W_]")
_CLAUSE = re.compile(r"(?<=[.!?;,。！？；，\n])")


@dataclass(frozen=True)
class Intent:
    device_id: str | None
    codes: list[str]
    sensors: list[str]
    wants_live: bool
    wants_work_order: bool
    symptom: bool
    # Nothing to act on: no letter, digit or character in the question.
    blank: bool = False
    # Machines named that the plant does not have; named alone, nothing is looked up or read.
    unknown_devices: tuple[str, ...] = ()
    # Asks for a value of the device, but no sensor fits the words it uses.
    unclear_value: bool = False


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
                from edge.rules.lexicon import Lexicon

                self._lexicon = Lexicon(self._devices, self._known_codes())
            return self._lexicon

    def searches_by_symptom(
        self,
        question: str,
        device_id: str | None = None,
        actor: str = "technician",
        session: SessionContext | None = None,
    ) -> bool:
        """Whether this question gets a symptom search of the manuals (the semantic search that needs
        the SBERT model); a fault-code or live-reading question does not."""
        state = RunState(question=question, device_id=device_id, session=session or SessionContext(), actor=actor)
        return self.analyse(state).symptom

    def analyse(self, state: RunState) -> Intent:
        question = state.question
        alarm = state.alarm or {}
        if not alarm and not _CONTENT.search(question):
            return Intent(
                device_id=None,
                codes=[],
                sensors=[],
                wants_live=False,
                wants_work_order=False,
                symptom=False,
                blank=True,
            )
        found = self.lexicon.find(question)
        unknown = () if alarm else tuple(found.unknown_devices)
        # A machine the plant does not have, named on its own, is what the question is about: not the tablet's
        # or the session's machine. Nothing is looked up or read for it.
        elsewhere = bool(unknown) and not found.devices
        device_id = (
            alarm.get("device_id")
            or (None if elsewhere else state.device_id)
            or (found.devices[0] if found.devices else None)
            or (None if elsewhere else state.session.device_id)
        )
        sensors = [sensor for owner, sensor in found.sensors if device_id is None or owner == device_id]
        # An alarm names its code; its text may hold none the lexicon can recognise (`K179A-0`, `OVERTEMP`).
        codes = [str(alarm["fault_code"])] if alarm.get("fault_code") else found.fault_codes[:_MAX_CODES]
        if elsewhere:
            codes, sensors = [], []
        entities = [(e.start_char, e.end_char) for e in found.entities]
        asks_value = not alarm and asks_for_value(question)
        if asks_value and not elsewhere:
            # "How warm is the motor": the device's own labels and units say which sensor is meant. What
            # the lexicon found is blanked first, so "how hot and how fast is the spindle" finds the other;
            # asked for every one of a kind ("every temperature"), the sensor words count again.
            every = asks_every(question)
            named = [(e.start_char, e.end_char) for e in found.entities if e.label_ != "SENSOR"] if every else entities
            words = blank_out(question, named)
            devices = [self._devices[device_id]] if device_id else list(self._devices.values())
            sensors += [sensor for device in devices for sensor in sensors_asked(words, device, every)]
        if device_id and not elsewhere and asks_if_safe(question):
            # "Is it safe to open the cabinet?": the plant's zero-energy signal decides (edge.run.verdicts).
            isolation = self._devices[device_id].isolation
            if isolation is not None and isolation.zero_energy is not None:
                sensors.append(isolation.zero_energy.sensor)
        # Neither a sensor's own name ("vibration", "振动") nor a value asked for ("how hot") is a symptom.
        rest = blank_out(question, entities + (value_phrase_spans(question) if asks_value else []))
        described = bool(_SYMPTOM.search(rest))
        wants_work_order = bool(_WORK_ORDER_WORDS.search(question)) or state.actor == "mes"
        if not (sensors or codes or elsewhere or described or wants_work_order):
            sensors = self._sensors_pointed_at(question, device_id, state.session)
        unclear_value = asks_value and not sensors and not codes and not described and device_id is not None
        # A free question ("where is the canteen") still goes to the manuals; a reading, an order or an
        # unknown machine gets a symptom search only when a symptom is described.
        other_intent = bool(sensors or wants_work_order or unclear_value or elsewhere)
        return Intent(
            device_id=device_id,
            codes=codes,
            sensors=list(dict.fromkeys(sensors)),
            wants_live=bool(_LIVE.search(question)),
            wants_work_order=wants_work_order,
            symptom=not codes
            and not elsewhere
            and not (wants_work_order and state.session.fault_codes)
            and (described or not other_intent),
            unknown_devices=unknown,
            unclear_value=unclear_value,
        )

    def _sensors_pointed_at(self, question: str, device_id: str | None, session: SessionContext) -> list[str]:
        """A follow-up about the readings the last answer named ("is that normal?", "再读一次"), or about the
        device's other sensors of their kind ("what about the other one?")."""
        if device_id is None or device_id != session.device_id or not refers_back(question):
            return []
        sensors = self._devices[device_id].sensors
        earlier = [sensor for sensor in session.sensors if sensor in sensors]
        if not asks_other(question):
            return earlier
        units = {sensors[sensor].unit for sensor in earlier}
        return [sensor.id for sensor in sensors.values() if sensor.unit in units and sensor.id not in earlier]

    def decide(self, state: RunState) -> Decision:
        intent = state.scratch.get("intent")
        if intent is None:
            intent = state.scratch["intent"] = self.analyse(state)
        done = {ToolCall("", step.action, step.args).key() for step in state.steps if step.action}
        for call in self._calls(intent, state):
            if call.key() not in done:
                return Decision(action=call)
        document = build_document(
            state.question, state.observations, self.notes(intent, state), self.missing(intent, state)
        )
        thought = PHRASES[language_of(state.question)]["thought_done"]
        return Decision(
            action=FinalAnswer(
                thought=thought,
                text=render_text(document),
                evidence=supporting_ids(state.observations),
                document=document,
            )
        )

    def _calls(self, intent: Intent, state: RunState):
        if intent.blank or (intent.unknown_devices and not intent.device_id):
            return
        device = {"device_id": intent.device_id} if intent.device_id else {}
        language = language_of(state.question)
        words = PHRASES[language]
        edition = {"language": "zh"} if language == "zh" else {}
        for code in intent.codes:
            yield ToolCall(words["thought_code"].format(code=code), _MANUAL, {"fault_code": code, **device, **edition})
        if intent.symptom:
            yield ToolCall(words["thought_symptom"], _MANUAL, {"query": _symptom_query(state.question), **device})
        if intent.device_id:
            sensors = self._devices[intent.device_id].sensors
            for sensor in intent.sensors or self._sensors_named_in_manual(intent.device_id, state.observations):
                # A Chinese trace names the sensor by its Chinese label; an English one by its id, as the call does.
                named = (language == "zh" and sensors[sensor].label_zh) or sensor
                yield ToolCall(
                    words["thought_read"].format(sensor=named, device=intent.device_id),
                    _PLC,
                    {"device_id": intent.device_id, "sensor": sensor},
                )
        reported = self._reported_code(intent, state)
        # Asked for, an order is opened on the code the technician reads off the HMI; proposed unasked,
        # only for a fault the manual lists for this very machine.
        wants_order = intent.wants_work_order or (
            state.propose_work_order
            and bool(intent.codes)
            and reported is not None
            and self._listed_for_device(reported, state)
        )
        if wants_order and intent.device_id and reported:
            thought = words["thought_order"] if intent.wants_work_order else words["thought_propose"]
            yield ToolCall(
                thought,
                _WORK_ORDER,
                {"device_id": intent.device_id, "fault_code": reported, "summary": _summary(reported, state)},
            )

    def _sensors_named_in_manual(self, device_id: str, observations: list[Observation]) -> list[str]:
        """Sensors that the top manual result's steps point at: the live evidence a technician wants beside them.
        Steps of an entry for another machine ("listed for other machines") say nothing about this one."""
        steps: list[str] = []
        for obs in observations:
            if obs.tool != _MANUAL or obs.status not in _ANSWERED:
                continue
            applies = True
            for item in obs.content:
                if item.kind == "ref":
                    applies = item.fields.get("applies_to_device") is not False
                elif item.kind == "step" and applies:
                    steps.append(item.text)
        found = [sensor for owner, sensor in self.lexicon.find(" ".join(steps)).sensors if owner == device_id]
        return list(dict.fromkeys(found))[:_MAX_FOLLOW_UP_READINGS]

    @staticmethod
    def _listed_for_device(code: str, state: RunState) -> bool:
        """Whether this run's manual lookup found `code` for the asked machine (not for another one)."""
        keys = set(lookup_keys(code))
        return any(
            item.kind == "ref"
            and code_key(str(item.fields.get("fault_code") or "")) in keys
            and item.fields.get("applies_to_device") is not False
            for obs in state.observations
            if obs.tool == _MANUAL and obs.status in _ANSWERED
            for item in obs.content
        )

    def _reported_code(self, intent: Intent, state: RunState) -> str | None:
        """The fault a technician or the MES reported (now or earlier in the session), in the manual's
        spelling once the manual has answered ("报警号 6065" -> "6065"). A symptom search's best guess
        is not a reported fault: no work order is opened on it."""
        reported = intent.codes or state.session.fault_codes[-1:]
        if not reported:
            return None
        keys = set(lookup_keys(reported[0]))
        for obs in state.observations:
            if obs.tool == _MANUAL and obs.status in _ANSWERED:
                for item in obs.content:
                    code = item.fields.get("fault_code") if item.kind == "ref" else None
                    if code and code_key(str(code)) in keys:
                        return str(code)
        return reported[0]

    def missing(self, intent: Intent, state: RunState) -> list[str]:
        words = PHRASES[language_of(state.question)]
        missing = []
        if (intent.sensors or intent.wants_live) and not intent.device_id and not intent.unknown_devices:
            missing.append(words["which_machine"].format(known=", ".join(self._devices)))
        if intent.unclear_value and intent.device_id:
            labels = [
                (language_of(state.question) == "zh" and sensor.label_zh) or sensor.label or sensor.id
                for sensor in self._devices[intent.device_id].sensors.values()
            ]
            missing.append(words["which_sensor"].format(device=intent.device_id, sensors=", ".join(labels)))
        if intent.wants_work_order and not intent.unknown_devices and not self._reported_code(intent, state):
            missing.append(words["which_code"])
        return missing

    def notes(self, intent: Intent, state: RunState) -> list[str]:
        words = PHRASES[language_of(state.question)]
        if intent.blank:
            return [words["ask"]]
        if intent.unknown_devices:
            return [
                words["unknown_device"].format(names=", ".join(intent.unknown_devices), known=", ".join(self._devices))
            ]
        return []


def _symptom_query(question: str) -> str:
    """The question as a symptom query, with the manuals' words for what it says in slang or speech
    ("rattles" → vibration, "没反应" → 无反应), within the manual tool's limit."""
    written = _written_forms(question)
    limit = QUERY_MAX_CHARS - len(written) - 1
    if not written or limit < QUERY_MAX_CHARS // 2:
        return _within(question, QUERY_MAX_CHARS)
    return f"{_within(question, limit)} {written}"


def _written_forms(question: str) -> str:
    """The glossary's written form of each concept the question puts in other words; a form the question
    already holds, or inflects ("starting"), adds nothing."""
    language = language_of(question)
    text = unicodedata.normalize("NFKC", question).lower()
    forms = [written_form(name, language) for start, end, name in glossary_concepts(text)]
    return " ".join(dict.fromkeys(form for form in forms if form.lower() not in text))


def _within(question: str, limit: int) -> str:
    """A long question keeps the clauses that describe the symptom, then is cut at a word."""
    if len(question) <= limit:
        return question
    clauses = [clause.strip() for clause in _CLAUSE.split(question) if _SYMPTOM.search(clause)]
    query = " ".join(clauses) or question
    if len(query) <= limit:
        return query
    cut = query[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def _summary(code: str, state: RunState) -> str:
    for obs in state.observations:
        for item in obs.content if obs.tool == _MANUAL else ():
            if item.kind == "ref" and item.fields.get("fault_code") == code and item.fields.get("title"):
                return f"{code}: {item.fields['title']}. Reported: {state.question}"[:500]
    return f"{code}. Reported: {state.question}"[:500]
