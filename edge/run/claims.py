"""What a planner's sentence may not say, whatever its words are backed by: the rules beside word support.

Word support (`edge.run.sentence_support`) asks whether an observation says a sentence's words; it cannot
see a sentence that drops what matters. A sentence of a planner's prose is refused when it
- weakens a safety statement or the lock-out: no need to isolate, work while energised, bridge an
  interlock — unless the manual or the plant itself says so;
- waits less, or more vaguely, than the manual or the plant's lock-out says ("wait a moment" against
  "wait at least 10 minutes");
- contradicts a verdict the code gave: calls a reading normal that is past its limit, or the reverse;
- gives a reading's value to another quantity ("the oil level is 45.1 °C" where the oil temperature
  reads 45.1 °C): the number is in an observation, so only its subject can be wrong;
- claims an action no observation shows: the agent resets, closes and repairs nothing (an order it
  created is the work-order check's, `edge.run.verification`).
Each rule returns its reason, in English, for the record and `/metrics`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from edge.run.document import AnswerDocument, Reading

WEAKENS_SAFETY = "weakens a safety statement or the lock-out"
SOFTENED_WAIT = "waits less, or more vaguely, than the manual says"
CONTRADICTS_VERDICT = "contradicts the verdict on a reading"
CLAIMED_ACTION = "claims an action no observation shows"
MISATTRIBUTED_VALUE = "gives a reading's value to another quantity"

_WEAKENING = re.compile(
    # The negation must govern the isolation word ("no need to isolate", "without locking out"): "do not open
    # the cabinet before you disconnect it" restates the lock-out.
    r"\b(?:no|without|never|skip\w*|needn'?t|(?:do|does)(?: not|n'?t) (?:have|need) to|not (?:necessary|needed|"
    r"required) to)\s+(?:\w+\s+){0,2}?(?:isolat\w*|lock\w*[- ]?out|lockout|loto|tag\w*[- ]?out|de-?energi[sz]\w*|"
    r"power\w* (?:it )?(?:off|down)|switch\w* (?:it )?off|disconnect\w*|ppe|gloves)"
    r"|\b(?:isolat\w*|lock[- ]?out|lockout|loto|de-?energi[sz]\w*)\b[^.;:!?]{0,30}?"
    r"\b(?:not (?:required|needed|necessary)|unnecessary|optional|can be skipped)"
    r"|\b(?:while|when)\s+(?:\w+\s+){0,4}?(?:energi[sz]ed|live|powered|under (?:power|pressure)|switched on)\b"
    r"|\b(?:bypass\w*|bridg\w*|jumper\w*|defeat\w*|override\w*|short(?:ing)? out)\b[^.;:!?]{0,30}?"
    r"\b(?:interlock\w*|safety|guard\w*|limit switch\w*|monitor\w*|e-?stop)"
    r"|(?:无需|不需要|不用|不必|跳过|省略|免去?)[^。；，]{0,10}(?:隔离|上锁|挂牌|断电|停电|断开|泄压|放电|等待)"
    r"|带电(?:作业|操作|维修|检修|拆)|(?:短接|跨接|屏蔽|旁路)[^。；]{0,10}(?:联锁|互锁|安全|保护|急停)",
    re.I,
)
_DURATION = re.compile(
    r"(\d+(?:\.\d+)?)\s*(seconds?|secs?|s|minutes?|mins?|min|hours?|hrs?|h|秒钟?|分钟|分|小时)(?![a-z])", re.I
)
_SECONDS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "秒": 1, "秒钟": 1}
_SECONDS.update({k: 60 for k in ("min", "mins", "minute", "minutes", "分钟", "分")})
_SECONDS.update({k: 3600 for k in ("h", "hr", "hrs", "hour", "hours", "小时")})
_WAIT = re.compile(
    r"\bwait\w*|\bfor a (?:moment|while|bit|second|minute)\b|\bbriefly\b|\bshortly\b|等待|稍等|等一会|等一下|片刻",
    re.I,
)
# A wait for a condition ("until the DC bus reads below 30 V") is no duration to compare.
_UNTIL = re.compile(
    r"\b(?:until|till)\b|直到|直至|等待?(?:其|它|到)|(?:降|升|冷却)(?:到|至)|以下|以上|静止|停稳|为止", re.I
)
_NORMAL = re.compile(
    r"\b(?:normal|fine|ok(?:ay)?|within (?:its |the )?(?:limits?|range)|acceptable|in range|no problem|nothing wrong|"
    r"as expected|healthy)\b|正常|没问题|在范围内|在限值以内|合格",
    re.I,
)
_ABNORMAL = re.compile(
    r"\b(?:too (?:high|low|hot|cold|much|little)|abnormal\w*|(?:past|above|over|beyond|below|under|exceed\w*) "
    r"(?:its |the )?(?:\w+ ){0,2}(?:limit|threshold|range)|overheat\w*|in alarm|alarming|critical)\b"
    r"|过高|过低|太高|太低|异常|超限|超标|过热|报警",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no|never|isn'?t|aren'?t|wasn'?t)\b|不|没|未|非", re.I)
_READINGS_WORD = re.compile(r"\b(?:readings?|values?|sensors?|everything|all)\b|读数|数值|一切|都", re.I)
_DONE_ACTION = re.compile(
    r"\b(?:has|have|had) been (?:reset|closed|cleared|acknowledged|restarted|fixed|repaired|replaced|isolated|"
    r"locked out|shut down|switched off|resolved)\b"
    r"|\b(?:i|we)(?:'ve| have)? (?:just |already )?(?:reset|closed|cleared|acknowledged|restarted|fixed|repaired|"
    r"replaced|isolated|locked out|resolved)\b"
    r"|\b(?:is|are) now (?:closed|reset|cleared|isolated|locked out|fixed|resolved|safe)\b"
    r"|已经?(?:复位|关闭|重置|清除|修复|更换|隔离|上锁|解决|处理完)|(?:我|我们)已?(?:复位|关闭|重置|清除)了",
    re.I,
)


def forbidden(sentence: str, doc: AnswerDocument, sources: Iterable[str]) -> list[str]:
    """Why `sentence` may not be shown beside `doc`; `sources`: the trusted texts it may echo (manual, plant)."""
    reasons = []
    if _WEAKENING.search(sentence) and not any(_WEAKENING.search(text) for text in sources):
        reasons.append(WEAKENS_SAFETY)
    if _softens_wait(sentence, doc):
        reasons.append(SOFTENED_WAIT)
    names_fault = _names_fault(sentence, doc)
    if any(_contradicts(sentence, reading, len(doc.readings), names_fault) for reading in doc.readings):
        reasons.append(CONTRADICTS_VERDICT)
    if _DONE_ACTION.search(sentence):
        reasons.append(CLAIMED_ACTION)
    if _misattributes(sentence, doc.readings):
        reasons.append(MISATTRIBUTED_VALUE)
    return reasons


_NUMBER = re.compile(r"(?<![0-9A-Za-z.])(\d+(?:\.(\d+))?)\s*([^\s\d.,;:!?。，；：]+)?")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _misattributes(sentence: str, readings: list[Reading]) -> bool:
    """The sentence states a reading's value with its unit, and names none of the readings that have it."""
    for match in _NUMBER.finditer(sentence):
        number, decimals, unit = match.group(1), match.group(2) or "", (match.group(3) or "").lower()
        having = [
            r
            for r in readings
            if r.value is not None
            and r.unit
            and re.match(re.escape(r.unit.lower()) + r"(?![a-z])", unit)
            # "45 °C" says 45.1 °C rounded; "45.3 °C" is another value, the fact check's to judge.
            and abs(float(number) - r.value) <= 0.5 * 10 ** -len(decimals)
        ]
        if having and not any(_names(sentence, r) for r in having):
            return True
    return False


def _names(sentence: str, reading: Reading) -> bool:
    """Its label, a word of its id as a word's start ("pressure" for hydraulic_pressure, "temperature" for
    oil_temp), or in Chinese two characters of its label in a row. Id words shorter than four letters (oil,
    dc) do not count alone: a machine has several quantities of its oil."""
    low = sentence.lower()
    if reading.label.lower() in low:
        return True
    words = re.findall(r"[a-z]+", low)
    if any(any(w.startswith(part) for w in words) for part in reading.sensor.lower().split("_") if len(part) >= 4):
        return True
    label = "".join(_CJK.findall(reading.label))
    return any(label[i : i + 2] in sentence for i in range(len(label) - 1))


def _required_wait_s(doc: AnswerDocument) -> float | None:
    """The longest wait the manual's safety statements and steps or the plant's lock-out name, in seconds."""
    texts = [s.text for s in doc.safety] + [s.text for s in doc.isolation]
    texts += [step for entry in doc.entries for step in entry.steps]
    waits = [_seconds(m) for text in texts if _WAIT.search(text) for m in _DURATION.finditer(text)]
    return max(waits, default=None)


def _softens_wait(sentence: str, doc: AnswerDocument) -> bool:
    if not _WAIT.search(sentence) or (_UNTIL.search(sentence) and not _DURATION.search(sentence)):
        return False
    needed = _required_wait_s(doc)
    if needed is None:
        return False
    said = [_seconds(m) for m in _DURATION.finditer(sentence)]
    return not said or max(said) < needed


def _seconds(match: re.Match[str]) -> float:
    return float(match.group(1)) * _SECONDS.get(match.group(2).lower(), 1)


def _names_fault(sentence: str, doc: AnswerDocument) -> bool:
    """The sentence names a fault entry (its code or title): "E104 — hydraulic pressure too high" says what
    the fault means, not what the reading is now."""
    low = sentence.lower()
    return any(entry.code.lower() in low or entry.title.lower() in low for entry in doc.entries)


def _contradicts(sentence: str, reading: Reading, readings: int, names_fault: bool) -> bool:
    if reading.verdict == "no_value" or not _about(sentence, reading, readings):
        return False
    negated = bool(_NEGATION.search(sentence))
    says_normal = bool(_NORMAL.search(sentence)) != negated and not _ABNORMAL.search(sentence)
    says_abnormal = bool(_ABNORMAL.search(sentence)) != negated and not _NORMAL.search(sentence)
    if reading.verdict == "within_limits":
        return says_abnormal and not names_fault
    return says_normal


def _about(sentence: str, reading: Reading, readings: int) -> bool:
    """The sentence names the reading's sensor (its label, its id's words), or speaks of the readings at large."""
    low = sentence.lower()
    names = {reading.label.lower(), reading.sensor.replace("_", " ").lower(), reading.sensor.lower()}
    if any(name and name in low for name in names):
        return True
    return bool(_READINGS_WORD.search(sentence)) and readings > 0
