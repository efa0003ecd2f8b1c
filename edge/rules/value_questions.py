"""Which sensor a value question asks for, read from the device's own configuration.

Technicians ask for a value in words no synonym list foresees ("how warm is the
motor", "切削液还有多少"). A question that asks for a value is matched against
each sensor of the device by what the sensor measures, as its configuration
says it: the words of its label, Chinese label and id (motor, oil, spindle,
冷却液) and the quantity its unit stands for (°C is warm or hot, rpm is fast or
turning, % is full or left). A plant adds sensors without touching this module;
only the quantities behind units are fixed here, and they hold for any plant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tools.plant import DeviceConfig

# A sensor question names at most this many sensors; a vaguer one asks which value is meant.
MAX_SENSORS = 2

# Asking for a value, not describing a problem: "how hot is it" asks, "it is hot" reports.
VALUE_PHRASE = re.compile(
    r"\bhow(?:'s|\s+is|\s+are)?\s+(?:warm|hot|cold|cool|fast|quick(?:ly)?|slow(?:ly)?|high|low|full|empty|rough(?:ly)?|"
    r"hard|much|many|far)\b|\bhow\s+\w+\s+(?:is|are|does|do)\b|\bhow's\b"
    r"|\b(?:what|which)(?:'s|\s+is|\s+are)?\s+(?:the\s+)?(?:\w+\s+)?"
    r"(?:at|reading|readings|value|showing|speed|temp\w*|pressure|level|rpm)\b"
    r"|\b(?:readings?|readout|gauge|value)\b|\b(?:show|tell|give)\s+me\b|\bis\s+there\s+(?:enough|still)\b"
    r"|\b(?:left|remaining)\b"
    r"|多少|几度|几个|多热|多烫|多冷|多快|多慢|多高|多低|多大|有多|读数|数值|示数|还剩|还有多少|剩下|剩多少|([热烫冷快慢高低够满])不\1",
    re.I,
)

# Judging a value asks for it too: "is the oil hot enough", "pressure too low?", "油温正常吗".
_JUDGEMENT = re.compile(
    r"\b(?:enough|normal|ok(?:ay)?|fine|alright|usual|expected|in\s+range|within\s+(?:\w+\s+)?(?:limits?|range|spec\w*)"
    r"|too\s+(?:hot|warm|cold|cool|high|low|fast|slow|much|little|full|empty)|in\s+the\s+(?:green|red|yellow)"
    r"|running\s+(?:low|high|hot|warm|cold|dry|fast|slow)"
    r"|(?:more|less|\w+er)\s+than\s+(?:usual|normal|expected|it\s+should))\b"
    r"|正常|偏[高低大小]|太[热烫冷快慢高低大小多少]|过[高低快慢热]|够",
    re.I,
)
# A yes/no question: a judgement in one is asked, in a statement it reports ("the motor is too hot to touch").
_YES_NO = re.compile(
    r"^\W*(?:is|are|was|were|does|do|did|has|have)\b|[?？]\s*$|[吗么]|是不是|有没有|([\u4e00-\u9fff])不\1",
    re.I,
)
# Asking why or what to do is about the fault, not a value to read.
_OPEN_QUESTION = re.compile(r"\b(?:why|how\s+come|what|which|where|when|who)\b|为什么|为啥|怎么|什么|哪|几", re.I)
# Every sensor of a kind, or every reading: "every temperature", "all the readings", "both temps", "所有温度",
# "两个温度", "各项读数"; the word after the quantifier says it ("every shift" is no reading).
_EVERY = re.compile(
    r"\b(?:all|every|each|both)(?:\s+(?:the|of|its|their))*\s+(?P<what>[\w-]+)"
    r"|(?:所有|全部|各项|各个|每个|每项|两个|两项|俩)的?(?P<zh>\w{1,4})",
    re.I,
)
_READINGS = re.compile(r"^(?:readings?|values?|sensors?|gauges?|numbers?)$|读数|数值|数据|参数|传感器", re.I)
# A follow-up points back at the readings the last answer named, or at the other ones of their kind.
_REFERS_BACK = re.compile(
    r"\b(?:that|this|it|those|these|them|they|again|same|other|another)(?:'?s)?\b|这|那|它|另|再", re.I
)
_OTHER = re.compile(r"\b(?:other|another|else)\b|另|别的|其他|其它", re.I)

# What each kind of unit measures, as people ask about it. Chinese has no word boundaries: its
# quantity words are matched anywhere, so they are the ones that cannot stand for anything else
# (not 冷 alone: 冷却液 is coolant, not cold).
_QUANTITIES: tuple[tuple[frozenset[str], str], ...] = (
    (
        frozenset({"°c", "℃", "degc", "°f", "℉", "k"}),
        r"\b(?:temp\w*|warm\w*|hot\w*|cold\w*|cool(?:er|ing)?|heat\w*|degrees?)\b|温|热|烫|多冷|冷不冷|几度|多少度|度数",
    ),
    (
        frozenset({"rpm", "1/min", "r/min", "min-1", "min⁻¹"}),
        r"\b(?:speed\w*|fast\w*|quick\w*|slow\w*|turn\w*|rotat\w*|spin(?:s|ning)?|spun|revs?|revolutions?)\b|转|速|快|慢",
    ),
    # "Enough" judges an amount or a pressure ("液压够不够", "is there enough coolant"), never a temperature.
    (
        frozenset({"bar", "mbar", "psi", "pa", "kpa", "mpa"}),
        r"\b(?:pressure|pressurised|pressurized|enough)\b|压力|压强|够|足不足",
    ),
    (
        frozenset({"%"}),
        r"\b(?:level|full|empty|left|remaining|enough|tank|top(?:ped)?\s+up|dry|run(?:ning)?\s+out)\b"
        # 空 and 满 as said of a tank ("快空了", "满不满"), not inside a word: 空压机, 空调, 空气, 满载.
        r"|液位|剩|还有多少|[快已将]?[空满]了|[空满]不[空满]|是[空满]的|加满|够|用完|见底",
    ),
    (
        frozenset({"mm/s", "in/s", "g", "µm", "um"}),
        r"\b(?:vibe?s?|vibrat\w*|shak\w*|rough\w*|wobbl\w*|chatter\w*|rattl\w*|judder\w*)\b|振|抖|晃",
    ),
    (frozenset({"a", "ma"}), r"\b(?:current|amps?|amperage)\b|电流"),
    (frozenset({"v", "kv", "mv"}), r"\b(?:voltage|volts?)\b|电压"),
    (frozenset({"l/min", "m³/h", "m3/h"}), r"\b(?:flow\w*)\b|流量"),
)
_QUANTITY_WORDS = [re.compile(words, re.I) for _, words in _QUANTITIES]
_WORD = re.compile(r"[a-z][a-z0-9]+")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")


def asks_for_value(text: str) -> bool:
    return (
        VALUE_PHRASE.search(text) is not None
        or _judges_value(text)
        or asks_every(text)  # "所有温度", "every temperature"
    )


def _judges_value(text: str) -> bool:
    """A yes/no question that judges a value or names a quantity: "is the spindle spinning too fast?",
    "压力够吗", "切削液快用完了吗"."""
    if not _YES_NO.search(text) or _OPEN_QUESTION.search(text):
        return False
    return _JUDGEMENT.search(text) is not None or _names_quantity(text)


def _names_quantity(text: str) -> bool:
    return any(pattern.search(text) for pattern in _QUANTITY_WORDS)


def asks_every(text: str) -> bool:
    for match in _EVERY.finditer(text):
        what = match.group("what") or match.group("zh")
        if _READINGS.search(what) or _names_quantity(what):
            return True
    return False


def refers_back(text: str) -> bool:
    """Points at something said before ("is that normal?", "check it again", "这个正常吗", "再读一次")."""
    return _REFERS_BACK.search(text) is not None


def asks_other(text: str) -> bool:
    """Asks about the rest of a kind ("what about the other one?", "那另一个呢")."""
    return _OTHER.search(text) is not None


def value_phrase_spans(text: str) -> list[tuple[int, int]]:
    """Where the question asks for a value: its "how hot" and "too low?" are no symptom."""
    spans = [match.span() for match in VALUE_PHRASE.finditer(text)]
    if _judges_value(text):
        # "is the oil hot enough": its "hot" is the value judged, not a motor that is hot.
        spans += [match.span() for pattern in (_JUDGEMENT, *_QUANTITY_WORDS) for match in pattern.finditer(text)]
    return spans


def sensors_asked(text: str, device: DeviceConfig, every: bool = False, subject_only: bool = False) -> list[str]:
    """The sensors of `device` that `text` asks about, best first; [] when none fits or too many fit equally.

    A sensor whose label names the thing asked about and whose unit measures the quantity asked
    for wins; then one whose unit fits; then one whose label fits. `text` should have the device's
    and the codes' own words blanked out, so "hydraulic press 3" does not count as "hydraulic".
    Asked for `every` one ("all the temperatures"), all that fit the quantity asked for are meant,
    and when nothing fits, every sensor of the device. With `subject_only`, only a sensor whose label names
    the thing asked about counts ("and the motor?" after a reading): a quantity alone points at none."""
    lowered = text.lower()
    if every:
        measured = [sensor.id for sensor in device.sensors.values() if _measures(sensor.unit, lowered)]
        return measured or list(device.sensors)
    scores: dict[str, tuple[bool, bool, int]] = {}
    for sensor in device.sensors.values():
        quantity = _measures(sensor.unit, lowered)
        # Synonyms are the lexicon's; they also hold phrases ("how fast") whose words name nothing.
        subject = sum(
            1 for word in _subject_words(sensor.id, sensor.label, sensor.label_zh) if _mentions(lowered, word)
        )
        if subject or (quantity and not subject_only):
            scores[sensor.id] = (quantity and subject > 0, quantity, subject)
    if not scores:
        return []
    best = max(scores.values())
    chosen = [sensor_id for sensor_id, score in scores.items() if score == best]
    return chosen if len(chosen) <= MAX_SENSORS else []


def sensor_implied(text: str, device: DeviceConfig) -> str | None:
    """The one sensor of `device` whose quantity a described problem names ("rattling like crazy" is a
    vibration, "too hot to touch" a temperature), the thing it is of breaking a tie ("the spindle is
    hot" on a machine with two thermometers); None when no sensor or several fit. `text` should have
    the device's and the codes' own words blanked out."""
    lowered = text.lower()
    measured = [sensor for sensor in device.sensors.values() if _measures(sensor.unit, lowered)]
    if len(measured) > 1:
        measured = [
            sensor
            for sensor in measured
            if any(_mentions(lowered, word) for word in _subject_words(sensor.id, sensor.label, sensor.label_zh))
        ]
    return measured[0].id if len(measured) == 1 else None


def _measures(unit: str, lowered: str) -> bool:
    unit = unit.strip().lower()
    if not unit:
        return False
    if (len(unit) > 1 and unit[0].isalpha()) and re.search(rf"(?<![a-z]){re.escape(unit)}(?![a-z])", lowered):
        return True  # the unit itself: "how many bar", "spindle rpm"
    return any(unit in units and pattern.search(lowered) for (units, _), pattern in zip(_QUANTITIES, _QUANTITY_WORDS))


def _subject_words(*names: str) -> set[str]:
    """What a sensor is of: its names' words and two-character Chinese words, without quantity words
    ("motor" and "电机" from "Main motor temperature" and "主电机温度", not "temperature" or "温度")."""
    words: set[str] = set()
    for name in names:
        lowered = name.lower().replace("_", " ")
        words.update(_WORD.findall(lowered))
        for run in _CJK_RUN.findall(lowered):
            words.update(run[i : i + 2] for i in range(len(run) - 1))
    return {word for word in words if not _is_quantity_word(word)}


def _is_quantity_word(word: str) -> bool:
    return any(pattern.search(word) for pattern in _QUANTITY_WORDS)


def _mentions(lowered: str, word: str) -> bool:
    if _CJK_RUN.fullmatch(word):
        return word in lowered
    return re.search(rf"\b{re.escape(word)}s?\b", lowered) is not None


def blank_out(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """`text` with each span replaced by spaces, offsets kept."""
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)
