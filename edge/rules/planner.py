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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from edge.rules.value_questions import (
    asks_every,
    asks_for_value,
    asks_other,
    blank_out,
    refers_back,
    sensor_implied,
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
    listed_codes,
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
from tools.work_orders.requested import declines_order
from tools.work_orders.tool import WorkOrderTool

if TYPE_CHECKING:
    from edge.rules.lexicon import Entity, Lexicon

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
_WORK_ORDER_WORDS = re.compile(
    r"\b(?:work[- ]?orders?|dispatch|tickets?|maintenance request)\b|工单|派单|报修"
    # Filing the fault just talked about: "book it in", "log it", "raise one", "提个单", "开个单".
    r"|\b(?:book|log|raise|file|write)\s+(?:it|this|that|one)\b|(?:开|提|建|报)个?单"
    # The abbreviation in capitals only: "WO" is no word, "wo" may be one (Chinese pinyin, a name).
    r"|(?-i:\bWOs?\b)",
    re.I,
)
_PRIORITY = (
    ("urgent", re.compile(r"\b(?:urgent(?:ly)?|asap|emergency)\b|紧急|加急|特急", re.I)),
    ("high", re.compile(r"\bhigh[- ]?prio(?:rity)?\b|\bprio(?:rity)?\s+high\b|高优先级|优先处理|尽快", re.I)),
)
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
# Asking what the manual says or what to do, not for a value: a follow-up on a reading then searches.
_ASKS_REMEDY = re.compile(
    r"\b(?:manuals?|what\s+(?:should|do|can|must)\s+(?:i|we)\s+do|what\s+to\s+do|how\s+(?:do\s+(?:i|we)\s+|to\s+)fix)\b"
    r"|手册|说明书|怎么办|怎么处理|如何处理|该怎么",
    re.I,
)
# What a question says about a sensor besides naming it: "coolant level please" says nothing, "oil temp
# keeps climbing and the ram crawls" describes what the machine does. Words of asking are not counted.
_SAYS_EN = re.compile(r"[a-z]{3,}", re.I)
_ASKING_EN = frozenset(
    [
        "and",
        "the",
        "for",
        "please",
        "pls",
        "can",
        "you",
        "could",
        "would",
        "tell",
        "show",
        "give",
        "read",
        "check",
        "get",
        "what",
        "whats",
        "how",
        "its",
        "this",
        "that",
        "with",
        "from",
        "also",
        "too",
        "then",
        "there",
        "here",
        "about",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "now",
        "right",
        "current",
        "currently",
        "value",
        "values",
        "reading",
        "readings",
        "level",
        "both",
        "all",
        "each",
        "every",
    ]
)
_SAYS_ZH = re.compile(r"[\u3400-\u9fff]")
_ASKING_ZH = frozenset("的了吗呢吧啊呀和与及跟都也还请帮我给看报读查下一个是多少现在当前目前实时值数各")
_SAYS_MIN_EN = 3
_SAYS_MIN_ZH = 4
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
    # Machines named one edit off the plant's spelling: (as typed, device id); the answer says how it read them.
    near_devices: tuple[tuple[str, str], ...] = ()
    # The question describes what the machine does (not only a free question that goes to the manuals).
    described: bool = False
    # "no ticket", "不要开工单": no order is opened or proposed, whoever asks.
    declines_work_order: bool = False
    # Asked for with the order ("urgent", "high prio"): the order's priority.
    priority: str | None = None
    # A code said of another machine the question names than `device_id`: that machine's.
    code_devices: dict[str, str] = field(default_factory=dict)
    # A sensor asked about in a clause of its own ("motor temp?? hmi shows something crazy"): read before
    # the manual is searched for what the rest describes.
    reads_first: bool = False
    # The readings a follow-up asks the manual about ("that's high, isn't it? what does the manual say?"),
    # by their labels: the words its search starts with.
    about: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuleStep:
    """The rules' next tool call and whether their trigger rules are certain of it: a code the manuals
    list (or an alarm names), a sensor the question names with "now"/"current", a sensor the manual's
    entry names, an order asked for or proposed on a listed fault. A symptom's search words, a sensor
    guessed from a vague question or a follow-up's referent are guesses a model may make better."""

    call: ToolCall | None  # None: the rules have nothing left to call and would answer now
    certain: bool = False
    why: str = ""


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
        names_sensor = bool(sensors)  # in the question's own words, before a value question or a safety check adds any
        asks_value = not alarm and asks_for_value(question)
        if asks_value and not elsewhere:
            # "How warm is the motor": the device's own labels and units say which sensor is meant. What
            # the lexicon found is blanked first, so "how hot and how fast is the spindle" finds the other;
            # asked for every one of a kind ("every temperature"), the sensor words count again.
            every = asks_every(question)
            named = [(e.start_char, e.end_char) for e in found.entities if e.label_ != "SENSOR"] if every else entities
            words = blank_out(question, named)
            devices = [self._devices[device_id]] if device_id else list(self._devices.values())
            # "油温多少度": the quantity asked is the named sensor's own; it points at no other sensor of
            # that unit unless the words name what that one is of.
            units = {
                self._devices[owner].sensors[sensor].unit for owner, sensor in found.sensors if owner in self._devices
            }
            sensors += [
                sensor
                for device in devices
                for sensor in sensors_asked(words, device, every)
                if every
                or device.sensors[sensor].unit not in units
                or sensor in sensors_asked(words, device, subject_only=True)
            ]
        if device_id and not elsewhere and asks_if_safe(question):
            # "Is it safe to open the cabinet?": the plant's zero-energy signal decides (edge.run.verdicts).
            isolation = self._devices[device_id].isolation
            if isolation is not None and isolation.zero_energy is not None:
                sensors.append(isolation.zero_energy.sensor)
        # Neither a sensor's own name ("vibration", "振动") nor a value asked for ("how hot") is a symptom.
        rest = blank_out(question, entities + (value_phrase_spans(question) if asks_value else []))
        live = bool(_LIVE.search(question))
        # A sensor named in a statement that says more about it ("oil temp keeps climbing and the ram crawls")
        # describes a symptom in the sensor's words: the manual is searched, and the sensor read beside it.
        described = bool(_SYMPTOM.search(rest)) or (names_sensor and not asks_value and not live and _says_more(rest))
        # "Don't open a ticket" names a ticket and asks for none; the work-order tool reads it the same way
        # (an MES alarm's order is the MES's to decide).
        declines_work_order = not alarm and declines_order(question)
        about: tuple[str, ...] = ()
        wants_work_order = not declines_work_order and (
            bool(_WORK_ORDER_WORDS.search(question)) or state.actor == "mes"
        )
        if device_id is not None and not (sensors or codes or elsewhere or wants_work_order):
            earlier = self._readings_asked_about(question, described, device_id, state.session)
            if earlier:
                zh = language_of(question) == "zh"
                readings = [self._devices[device_id].sensors[sensor] for sensor in earlier]
                about = tuple((zh and sensor.label_zh) or sensor.label or sensor.id for sensor in readings)
                sensors, described = earlier, True
            elif not described:
                sensors, codes = self._follow_up(question, entities, asks_value, device_id, state.session)
        unclear_value = asks_value and not sensors and not codes and not described and device_id is not None
        # A free question ("where is the canteen") still goes to the manuals; a reading, an order or an
        # unknown machine gets a symptom search only when a symptom is described.
        other_intent = bool(sensors or wants_work_order or unclear_value or elsewhere)
        if (described or not other_intent) and not (sensors or codes or asks_value) and device_id is not None:
            # "cnc7 rattling like crazy": a problem told by the quantity one sensor measures has that
            # sensor read beside the manual's entry.
            implied = sensor_implied(rest, self._devices[device_id])
            sensors += [implied] if implied else []
        return Intent(
            device_id=device_id,
            codes=codes,
            sensors=list(dict.fromkeys(sensors)),
            wants_live=live,
            wants_work_order=wants_work_order,
            symptom=not codes
            and not elsewhere
            and not (wants_work_order and state.session.fault_codes)
            and (described or not other_intent),
            unknown_devices=unknown,
            unclear_value=unclear_value,
            near_devices=tuple(found.near_devices) if not elsewhere else (),
            described=described,
            declines_work_order=declines_work_order,
            priority=next((level for level, words in _PRIORITY if words.search(question)), None),
            code_devices={} if alarm or elsewhere else found.code_devices,
            reads_first=names_sensor and _asked_in_own_clause(question, found.entities),
            about=about,
        )

    def _follow_up(
        self, question: str, entities: list[tuple[int, int]], asks_value: bool, device_id: str, session: SessionContext
    ) -> tuple[list[str], list[str]]:
        """What a follow-up without a code, sensor or symptom of its own is about, on the machine of the
        session: a sensor it names by what it measures after a reading ("and the motor?", "主电机的呢"); the
        fault talked about, when it asks anything but a value ("what should I check first?"); else the
        readings it points back at ("is that normal?"). Returns (sensors, codes)."""
        device = self._devices[device_id]
        if device_id != session.device_id:
            # "and on the cnc?" after a reading on the press: the same readings, of this machine.
            return [sensor for sensor in session.sensors if sensor in device.sensors], []
        if any(sensor in device.sensors for sensor in session.sensors):
            named = sensors_asked(blank_out(question, entities), device, subject_only=True)
            if named:
                return named, []
        if session.fault_codes and not asks_value:
            return [], session.fault_codes[-1:]
        return self._sensors_pointed_at(question, device_id, session), []

    def _readings_asked_about(
        self, question: str, described: bool, device_id: str, session: SessionContext
    ) -> list[str]:
        """The readings of the session's machine a follow-up asks the manual about ("that's too high, what
        should I do?", "偏高了吧，手册里怎么处理？"): one that asks what to do, says nothing of its own or points
        back, and follows readings, not a fault (a fault's follow-up stays on that fault)."""
        if device_id != session.device_id or session.fault_codes or not _ASKS_REMEDY.search(question):
            return []
        if described and not refers_back(question):
            return []
        return [sensor for sensor in session.sensors if sensor in self._devices[device_id].sensors]

    def _sensors_pointed_at(self, question: str, device_id: str, session: SessionContext) -> list[str]:
        """A follow-up about the readings the last answer named ("is that normal?", "再读一次"), or about the
        device's other sensors of their kind ("what about the other one?")."""
        if not refers_back(question):
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

    def next_steps(self, state: RunState) -> list[RuleStep]:
        """The calls the rules would still make in this run, each with whether they are certain of it."""
        intent = state.scratch.get("intent")
        if intent is None:
            intent = state.scratch["intent"] = self.analyse(state)
        done = {ToolCall("", step.action, step.args).key() for step in state.steps if step.action}
        return [self._judged(call, intent, state) for call in self._calls(intent, state) if call.key() not in done]

    def _judged(self, call: ToolCall, intent: Intent, state: RunState) -> RuleStep:
        args = call.args
        if call.tool == _MANUAL and args.get("fault_code"):
            code = str(args["fault_code"])
            if "known_keys" not in state.scratch:
                state.scratch["known_keys"] = {key for known in self._known_codes() for key in lookup_keys(known)}
            listed = bool(state.alarm) or bool(set(lookup_keys(code)) & state.scratch["known_keys"])
            return RuleStep(call, listed, f"code {code} " + ("is listed in the manuals" if listed else "is not listed"))
        if call.tool == _MANUAL:
            return RuleStep(call, False, "a symptom: its search words are a guess")
        if call.tool == _PLC:
            sensor = args["sensor"]
            if sensor in self._sensors_named_in_manual(args["device_id"], state.observations):
                return RuleStep(call, True, f"the manual's entry names {sensor}")
            named = {found for _, found in self.lexicon.find(state.question).sensors}
            if intent.wants_live and sensor in named:
                return RuleStep(call, True, f"the question names {sensor} and asks for its value now")
            return RuleStep(call, False, f"{sensor} is a guess at the sensor the question means")
        why = "a work order is asked for" if intent.wants_work_order else "a proposal on a listed fault"
        return RuleStep(call, True, why)

    def _calls(self, intent: Intent, state: RunState):
        if intent.blank or (intent.unknown_devices and not intent.device_id):
            return
        device = {"device_id": intent.device_id} if intent.device_id else {}
        language = language_of(state.question)
        words = PHRASES[language]
        edition = {"language": "zh"} if language == "zh" else {}
        for code in intent.codes:
            machine = {"device_id": intent.code_devices[code]} if code in intent.code_devices else device
            yield ToolCall(words["thought_code"].format(code=code), _MANUAL, {"fault_code": code, **machine, **edition})
        search = []
        if intent.symptom:
            query = _symptom_query(" ".join([*intent.about, self._search_words(state.question, intent.described)]))
            search = [ToolCall(words["thought_symptom"], _MANUAL, {"query": query, **device})]
        yield from [] if intent.reads_first else search
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
        yield from search if intent.reads_first else []
        reported = self._reported_code(intent, state)
        # Asked for, an order is opened on the code the technician reads off the HMI; proposed unasked,
        # only for a fault the manual lists for this very machine.
        wants_order = intent.wants_work_order or (
            not intent.declines_work_order
            and state.propose_work_order
            and bool(intent.codes)
            and reported is not None
            and self._listed_for_device(reported, state)
        )
        if wants_order and intent.device_id and reported:
            thought = words["thought_order"] if intent.wants_work_order else words["thought_propose"]
            priority = {"priority": intent.priority} if intent.priority else {}
            yield ToolCall(
                thought,
                _WORK_ORDER,
                {
                    "device_id": intent.device_id,
                    "fault_code": reported,
                    "summary": _summary(reported, state),
                    **priority,
                },
            )

    def _search_words(self, question: str, described: bool) -> str:
        """The question as the manuals are searched for it. A question that describes nothing has its
        machines said as "the machine" (the device is the search's scope): their names' words ("液压机",
        "hydraulic press") would find the entries that share them, whatever was asked, where a described
        symptom keeps them as its context. Terminal and connector labels ("X12") go: the search reads any
        code shape as a code to look up."""
        spans = [
            (e.start_char, e.end_char, e.label_)
            for e in self.lexicon.find(question).entities
            if e.label_ == "WIRING_LABEL" or (e.label_ == "DEVICE" and not described)
        ]
        machine = PHRASES[language_of(question)]["the_machine"]
        kept, at = [], 0
        for start, end, label in spans:
            kept += [question[at:start], machine if label == "DEVICE" else ""]
            at = end
        return " ".join("".join([*kept, question[at:]]).split())

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
        return any(code_key(listed) in keys for listed in listed_codes(state.observations))

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
        language = language_of(state.question)
        return [
            words["device_read_as"].format(
                typed=typed,
                device=device_id,
                name=(language == "zh" and self._devices[device_id].name_zh) or self._devices[device_id].name,
            )
            for typed, device_id in intent.near_devices
        ]


def _says_more(rest: str) -> bool:
    """Whether what is left of a question, its names blanked out, says something of its own."""
    english = [word for word in _SAYS_EN.findall(rest.lower()) if word not in _ASKING_EN]
    chinese = [char for char in _SAYS_ZH.findall(rest) if char not in _ASKING_ZH]
    return len(english) >= _SAYS_MIN_EN or len(chinese) >= _SAYS_MIN_ZH


def _asked_in_own_clause(question: str, entities: Iterable[Entity]) -> bool:
    """Whether a sensor the question names ends its clause with a question mark ("press 3 motor temp??",
    "dc link bled down yet?"), not a clause that goes on to describe ("oil temp keeps climbing, ...")."""
    for entity in entities:
        if entity.label_ == "SENSOR":
            clause_end = _CLAUSE.search(question, entity.end_char)
            if clause_end and question[clause_end.start() - 1] in "?？":
                return True
    return False


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
