"""Finding devices, sensors and fault codes in a question (English and Chinese).

Every match becomes an entity labelled DEVICE, SENSOR or FAULT_CODE whose
`kb_id_` is the canonical id (`press-3`, `coolant_level`, `fault:E102`).
Entities are resolved as they were on a spaCy blank Chinese pipeline (one
token per character): a match that does not start and end on a token is left
out, and of overlapping matches the longest (then the first) is kept. The synonym
lexicon comes from the plant config, so a plant adds words without touching
code. A machine named with a number the plant does not have ("line-4",
"press 9", "5号液压机") is an UNKNOWN_DEVICE, not a fault code; codes typed
loosely ("E1O2", "e.103") are found by `edge.rules.loose_codes`. A machine's name
typed one edit off ("prss-3", "7号加工中新") is that machine when its number is
the same (`near_devices` says how it was read); "press 9" stays unknown. A sensor's
word of seven letters or more typed one edit off ("coolent", "temprature") is that sensor. A
terminal's or connector's label ("plug at X12", "CN2", "端子 X5") is no fault
code unless a manual lists it as one.

Fault codes come from `knowledge.code_mentions`: the spaCy code linker's
reading, without importing spaCy for plain English text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from edge.rules.loose_codes import LooseCodes
from edge.run import language_of
from knowledge.code_mentions import CodeMention, CodeMentions
from knowledge.codes import CUE_EN, canonical_id, code_key, lookup_keys, reported_code
from tools.plant import DeviceConfig, normalize_name

_CJK = re.compile(r"[\u3400-\u9fff]")
# A machine named with a number ("line-4", "robot_2"): the shape of a code, but the word is no code cue.
_NUMBERED_NAME = re.compile(r"(?<![\w-])([A-Za-z]{3,})[-_]\d{1,4}(?![\w-])")
_CODE_CUE = re.compile(CUE_EN, re.I)
# Kinds of machine that stand on their own in a plant, none of them a part of another machine ("pump",
# "conveyor", "motor", "robot" are left out: a press has a pump, a machining centre a chip conveyor). One
# with a number ("forklift 2 shows E104", "6号天车报F02") is a machine this plant does not have, however much
# its code looks like one of ours. Without a number ("the forklift battery") the manuals may still cover
# it: it is searched, and the manual tool says whether they do.
_MACHINE_KINDS = (
    "forklift", "fork lift", "lift truck", "reach truck", "crane", "hoist", "air compressor", "compressor",
    "boiler", "chiller", "cooling tower", "injection moulding machine", "injection molding machine", "lathe",
    "welding robot", "gabelstapler", "kran", "kompressor",
    "叉车", "行车", "天车", "起重机", "吊车", "空压机", "压缩机", "锅炉", "冷水机", "冷却塔", "注塑机", "车床",
)  # fmt: skip
# A machine's number right after a machine word ("hydraulic press 9") or "N号" right before one ("5号液压机").
# Two digits at most after a word: "cnc-7 6065" is a machine and its code.
_NUMBER_AFTER = re.compile(r"[\s-]?\d{1,2}(?![\w])")
_NUMBER_BEFORE = re.compile(r"\d{1,4}\s*号\s*$")
# A typo is one edit (insert, delete, replace, swap two neighbours) in a name long enough that one edit leaves
# it recognisable: five letters or more ("prss 3"), and a Chinese name with its number ("7号加工中新"). Short or
# article-led names ("cnc 7", "the press") are left alone: one edit makes them other words ("they press").
_NEAR_MIN_LETTERS = 5
_NEAR_MIN_SENSOR_LETTERS = 7
_NEAR_MIN_CJK = 5
_LATIN_TOKEN = re.compile(r"[A-Za-z0-9]+")
_ARTICLE = re.compile(r"^(?:the|a|an)\b", re.I)
# How wiring is labelled: IEC 81346 terminal strips and plugs (X12, XT1, -X3:2), connector headers (CN2, J3).
_WIRING_SHAPE = r"[-+]?(?:X|XS|XP|XT|XJ|CN|J|JP|TB)\d{1,3}(?:[.:]\d{1,3})?"
_WIRING_LABEL = re.compile(rf"^{_WIRING_SHAPE}$")
_WIRING_TOKEN = re.compile(rf"(?<![A-Za-z0-9_-]){_WIRING_SHAPE}(?![A-Za-z0-9_-])")
# A code shape right beside a word for a connector or terminal ("encoder plug at X12", "X5 terminal", "插头X12").
_WIRING_BEFORE = re.compile(
    r"(?:\b(?:connector|plug|socket|terminal|pin|port|jack|header|cable|wire|lead|harness|strip)s?"
    r"(?:\s+(?:at|on|of|in|to|into))?|插头|插座|接头|端子|连接器|接口|插针|针脚|接线)\s*[:#]?\s*$",
    re.I,
)
_WIRING_AFTER = re.compile(
    r"^\s*(?:\b(?:connector|plug|socket|terminal|pin|port|jack|header|cable)s?\b|插头|插座|接头|端子|连接器|接口|插针|针脚)",
    re.I,
)


@dataclass(frozen=True)
class Mention:
    label: str  # DEVICE | SENSOR | FAULT_CODE | UNKNOWN_DEVICE | WIRING_LABEL
    canonical: str
    text: str
    start: int
    end: int
    device_id: str | None = None
    # A name typed one edit off: the plant's spelling it was read as.
    meant: str | None = None


class Entity(NamedTuple):
    """One resolved entity, with the attribute names of a spaCy `Span`."""

    label_: str
    kb_id_: str
    start_char: int
    end_char: int
    text: str


class _Entities(NamedTuple):
    ents: tuple[Entity, ...]


@dataclass(frozen=True)
class Mentions:
    devices: list[str] = field(default_factory=list)
    # (device_id, sensor_id) pairs; device_id is the device the synonym belongs to.
    sensors: list[tuple[str, str]] = field(default_factory=list)
    fault_codes: list[str] = field(default_factory=list)
    # Machines named in the question that the plant does not have ("line-4", "5号液压机"), as written.
    unknown_devices: list[str] = field(default_factory=list)
    # Machines named one edit off the plant's spelling: (as typed, device id).
    near_devices: list[tuple[str, str]] = field(default_factory=list)
    # Labels of terminals and connectors ("X12", "CN2"), as written: no fault codes.
    wiring_labels: list[str] = field(default_factory=list)
    # Each code said of a machine named before it ("press-3 shows F03 and cnc-7 shows DOOR_OPEN").
    code_devices: dict[str, str] = field(default_factory=dict)
    # Non-overlapping, in text order.
    entities: tuple[Entity, ...] = ()

    @property
    def doc(self) -> _Entities:
        """`doc.ents`, as readers of the former spaCy `Doc` expect it."""
        return _Entities(self.entities)


class Lexicon:
    def __init__(self, devices: dict[str, DeviceConfig], known_codes: Iterable[str] = ()):
        self._known = frozenset(known_codes)
        self._loose = LooseCodes(self._known)
        self._known_keys = frozenset(code_key(code) for code in self._known)
        self._codes = CodeMentions(self._known)
        self._devices = devices
        terms: dict[str, list[tuple[str, str, str | None]]] = {}
        for device in devices.values():
            for word in {device.id, device.name, device.name_zh, *device.synonyms} - {""}:
                terms.setdefault(word.lower(), []).append(("DEVICE", device.id, None))
            for sensor in device.sensors.values():
                for word in {
                    sensor.id,
                    sensor.id.replace("_", " "),
                    sensor.label,
                    sensor.label_zh,
                    *sensor.synonyms,
                } - {""}:
                    terms.setdefault(word.lower(), []).append(("SENSOR", sensor.id, device.id))
        self._terms = terms
        self._numbered_names = {
            normalize_name(word)
            for device in devices.values()
            for word in (device.id, device.name, device.name_zh, *device.synonyms)
            if any(char.isdigit() for char in word)
        }
        # The word part of the plant's own ids ("press", "cnc"): "press 9" and "CNC-12" are machines too.
        stems = sorted(
            {match.group(0).lower() for device_id in devices if (match := re.match(r"[A-Za-z]{2,}", device_id))}
        )
        own = " ".join(
            normalize_name(word)
            for device in devices.values()
            for word in (device.id, device.name, device.name_zh, *device.synonyms)
        )
        kinds = sorted((kind for kind in _MACHINE_KINDS if normalize_name(kind) not in own), key=len, reverse=True)
        kind_words = "|".join(map(re.escape, kinds))
        self._kind_pattern = (
            re.compile(
                rf"\d{{1,4}}\s*号\s*(?:{kind_words})|(?<![A-Za-z])(?:{kind_words})s?[\s#-]*\d{{1,3}}(?!\w)",
                re.I,
            )
            if kinds
            else None
        )
        self._stem_pattern = (
            re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, stems))})[\s_-]?\d{{1,2}}(?![\w-])", re.I)
            if stems
            else None
        )
        # Longest first, so "coolant level" wins over "coolant" and "3号液压机" over "液压机".
        alternatives = sorted(terms, key=len, reverse=True)
        self._pattern = re.compile("|".join(_term_regex(term) for term in alternatives)) if alternatives else None

    def warm(self) -> None:
        """Load the spaCy code linker now, for the text that the plain reading does not cover."""
        self._codes.warm()

    def find(self, text: str) -> Mentions:
        exact = _without_overlaps(self._term_mentions(text))
        terms = sorted(exact + _without_overlaps(self._near_terms(text, exact)), key=lambda m: m.start)
        unknown = self._unknown_devices(text, terms)
        terms = [t for t in terms if _apart(t, unknown)]
        # A device id such as "Press-3" also has the shape of a code; the plant's own words win.
        codes, labels = [], []
        for code in self._code_mentions(text):
            if not _apart(code, terms + unknown):
                continue
            if self._wiring_label(text, code):
                printed = text[code.start : code.end]
                labels.append(Mention("WIRING_LABEL", printed, printed, code.start, code.end))
                continue
            printed = self._as_known(_as_printed(code.code, code.canonical_id))
            codes.append(Mention("FAULT_CODE", code.canonical_id, printed, code.start, code.end))
        # Label-shaped words the code reading passed over ("J3 got unplugged") are labels all the same.
        labels += [
            Mention("WIRING_LABEL", match.group(0), match.group(0), *match.span())
            for match in _WIRING_TOKEN.finditer(text)
            if _apart(_At(*match.span()), terms + unknown + codes + labels)
            and not any(key in self._known_keys for key in lookup_keys(match.group(0)))
        ]
        codes += [
            Mention("FAULT_CODE", canonical_id(code.code), code.code, code.start, code.end)
            for code in self._loose.find(text)
            if _apart(code, terms + unknown + codes + labels)
        ]
        mentions = sorted(terms + codes + unknown + labels, key=lambda m: m.start)
        return _collect(mentions, _entities(text, mentions))

    def _near_terms(self, text: str, taken: list[Mention]) -> list[Mention]:
        """Device names typed one edit off, with the same number, and sensor words typed one edit off
        ("coolent level"), where no other term of the plant was found."""
        found: list[Mention] = []
        for term, meanings in self._terms.items():
            owners = {canonical for label, canonical, _ in meanings if label == "DEVICE"}
            if len(owners) == 1:  # a word two machines share names neither
                (device_id,) = owners
                windows = _cjk_windows(text, term) if _CJK.search(term) else _latin_windows(text, term)
                found += [
                    Mention("DEVICE", device_id, text[start:end], start, end, meant=term)
                    for start, end in windows
                    if _apart(_At(start, end), taken)
                ]
            sensors = [(sensor, device_id) for label, sensor, device_id in meanings if label == "SENSOR"]
            # Short words are a typo away from other words ("speed", "spend"); a sensor's longer words are not.
            if sensors and not _CJK.search(term) and len(_letters_and_digits(term)) >= _NEAR_MIN_SENSOR_LETTERS:
                found += [
                    Mention("SENSOR", sensor, text[start:end], start, end, device_id, meant=term)
                    for start, end in _latin_windows(text, term)
                    if _apart(_At(start, end), taken)
                    for sensor, device_id in sensors
                ]
        return found

    def _wiring_label(self, text: str, code: CodeMention) -> bool:
        """A terminal's or connector's label, not a fault code: shaped like one (X12, CN2) or written beside a
        word for one ("plug at 34"), and listed by no manual."""
        printed = text[code.start : code.end]
        if any(key in self._known_keys for key in lookup_keys(printed)):
            return False
        return bool(
            _WIRING_LABEL.match(printed.strip())
            or _WIRING_BEFORE.search(text, 0, code.start)
            or _WIRING_AFTER.match(text, code.end)
        )

    def _numbered_name_is_known(self, name: str) -> bool:
        """ "the press 3" ends in "press 3", "machining centre 7" ends "CNC machining centre 7": names of the
        plant's machines. "5号液压机" ends in "液压机" too, but that names no number."""
        wanted = normalize_name(name)
        return any(
            known.endswith(wanted) or (wanted.endswith(known) and any(char.isdigit() for char in known))
            for known in self._numbered_names
        )

    def _as_known(self, printed: str) -> str:
        """A code shape the manuals do not know, that is a known code typed loosely (`O4101` for `04101`),
        as the manuals print it; any other code as printed."""
        if any(key in self._known_keys for key in lookup_keys(printed)):
            return printed
        return self._loose.resolve(reported_code(printed)) or self._loose.resolve(printed) or printed

    def _unknown_devices(self, text: str, terms: list[Mention]) -> list[Mention]:
        """Machines with a number that the plant does not have: "line-4", "press 9", "hydraulic press 9",
        "5号液压机"; and kinds of machine it has none of ("forklift 2", "the air compressor"). Named in the
        answer as unknown, never looked up as fault codes."""
        spans = [
            m.span()
            for m in _NUMBERED_NAME.finditer(text)
            if not _CODE_CUE.fullmatch(m.group(1)) and code_key(m.group(0)) not in self._known_keys
        ]
        for pattern in (self._stem_pattern, self._kind_pattern):
            if pattern is not None:
                spans += [m.span() for m in pattern.finditer(text)]
        for term in terms:
            if term.label != "DEVICE":
                continue
            after = _NUMBER_AFTER.match(text, term.end)
            if after and term.text[-1:].isalpha() and not _CJK.search(term.text):
                spans.append((term.start, after.end()))
            before = _NUMBER_BEFORE.search(text, 0, term.start)
            if before:
                spans.append((before.start(), term.end))
        found: list[Mention] = []
        for start, end in sorted(set(spans)):
            mention = Mention("UNKNOWN_DEVICE", text[start:end], text[start:end], start, end)
            # "prss-3" has the shape of a machine's name: read as the plant spells it, it is press-3.
            spelled = _as_meant(text, start, end, [t for t in terms if t.meant is not None])
            if not self._numbered_name_is_known(spelled) and _apart(mention, found):
                found.append(mention)
        return found

    def _code_mentions(self, text: str) -> list[CodeMention]:
        return self._codes.find(text, language_of(text))

    def _term_mentions(self, text: str) -> list[Mention]:
        if self._pattern is None:
            return []
        found = []
        for match in self._pattern.finditer(text.lower()):
            for label, canonical, device_id in self._terms[match.group(0)]:
                found.append(
                    Mention(label, canonical, text[match.start() : match.end()], match.start(), match.end(), device_id)
                )
        return found


def _entities(text: str, mentions: list[Mention]) -> tuple[Entity, ...]:
    """The mentions as entities of spaCy's blank Chinese pipeline: `Doc.char_span` (strict) on
    its tokens, then `spacy.util.filter_spans`."""
    starts, ends = _char_tokens(text)
    spans = [(starts[m.start], ends[m.end], m) for m in mentions if m.start in starts and m.end in ends]
    kept: list[tuple[int, int, Mention]] = []
    seen: set[int] = set()
    for first, stop, mention in sorted(spans, key=lambda s: (s[1] - s[0], -s[0]), reverse=True):
        if first not in seen and stop - 1 not in seen:
            kept.append((first, stop, mention))
            seen.update(range(first, stop))
    return tuple(
        Entity(m.label, m.canonical, m.start, m.end, text[m.start : m.end])
        for _, _, m in sorted(kept, key=lambda s: s[0])
    )


def _char_tokens(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """Token index by start and by end offset, as `spacy.blank("zh")` splits text: one token
    per non-space character; one plain space after a token belongs to it, other whitespace
    runs are tokens of their own."""
    bounds: list[tuple[int, int]] = []
    position = 0
    for offset, char in enumerate(text):
        if char.isspace():
            continue
        if offset > position:
            bounds.append((position, offset))
        bounds.append((offset, offset + 1))
        position = offset + 1
        if position < len(text) and text[position] == " ":
            position += 1
    if position < len(text):
        bounds.append((position, len(text)))
    return ({start: n for n, (start, _) in enumerate(bounds)}, {end: n + 1 for n, (_, end) in enumerate(bounds)})


def _as_printed(mention: str, canonical_id: str) -> str:
    """The code as the HMI prints it: "fault E102" -> "E102", "DRV_FAULT" stays. A bare number keeps
    its cue word ("ALARM 1", "报警号 6065"): the manual tool tries it with and without."""
    key = canonical_id.removeprefix("fault:")
    if key.isdigit():
        return mention
    for start in range(len(mention)):
        if code_key(mention[start:]) == key:
            return mention[start:].strip()
    return mention


class _At(NamedTuple):
    start: int
    end: int


def _latin_windows(text: str, term: str) -> list[tuple[int, int]]:
    """Runs of words in `text` one edit from `term` (spacing and hyphens aside), with `term`'s digits."""
    key = _letters_and_digits(term)
    if _ARTICLE.match(term) or sum(char.isalpha() for char in key) < _NEAR_MIN_LETTERS:
        return []
    size = len(_LATIN_TOKEN.findall(term))
    tokens = [match.span() for match in _LATIN_TOKEN.finditer(text)]
    found = []
    for first in range(len(tokens)):
        for count in range(max(1, size - 1), size + 2):
            if first + count > len(tokens):
                break
            start, end = tokens[first][0], tokens[first + count - 1][1]
            if _one_edit_away(_letters_and_digits(text[start:end]), key):
                found.append((start, end))
    return found


def _cjk_windows(text: str, term: str) -> list[tuple[int, int]]:
    """Stretches of `text` one edit from a Chinese name with a number ("7号加工中新" for "7号加工中心")."""
    if len(term) < _NEAR_MIN_CJK or not any(char.isdigit() for char in term):
        return []
    found = []
    for start in range(len(text)):
        if text[start] != term[0]:  # the number leads: "3号…" is only ever machine 3
            continue
        for size in (len(term) - 1, len(term), len(term) + 1):
            typed = text[start : start + size].lower()
            if len(typed) == size and not any(char.isspace() for char in typed) and _one_edit_away(typed, term):
                found.append((start, start + size))
    return found


def _letters_and_digits(text: str) -> str:
    return "".join(char for char in text.lower() if char.isalnum())


def _one_edit_away(typed: str, term: str) -> bool:
    """Exactly one edit apart (optimal string alignment distance 1), and the same digits: "press 9" is no
    typo of "press 3", it is another machine."""
    if typed == term or abs(len(typed) - len(term)) > 1:
        return False
    if [char for char in typed if char.isdigit()] != [char for char in term if char.isdigit()]:
        return False
    head = 0
    while head < min(len(typed), len(term)) and typed[head] == term[head]:
        head += 1
    a, b = typed[head:], term[head:]
    return (
        a[1:] == b[1:]  # one replaced
        or a[1:] == b  # one inserted
        or a == b[1:]  # one left out
        or (len(a) == len(b) >= 2 and a[0] == b[1] and a[1] == b[0] and a[2:] == b[2:])  # two swapped
    )


def _as_meant(text: str, start: int, end: int, near: list[Mention]) -> str:
    """`text[start:end]` with each typo in it spelled as the name it was read as."""
    pieces, at = [], start
    for mention in sorted(near, key=lambda m: m.start):
        if mention.start >= at and mention.end <= end:
            pieces += [text[at : mention.start], mention.meant or mention.text]
            at = mention.end
    return "".join(pieces) + text[at:end]


def _term_regex(term: str) -> str:
    escaped = re.escape(term)
    if _CJK.search(term):
        return escaped
    # Latin words need boundaries: "press" must not fire inside "pressure". A Chinese character is no
    # part of a Latin word: "cnc-7主轴有异响" names cnc-7 (to `\w`, 主 is a word character).
    latin = r"(?:-|(?![\u3400-\u9fff])\w)"
    return rf"(?<!{latin}){escaped}(?!{latin})"


class _Span(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def _apart(mention: _Span, others: list[Mention]) -> bool:
    return all(mention.end <= other.start or mention.start >= other.end for other in others)


def _without_overlaps(mentions: list[Mention]) -> list[Mention]:
    """Keep the longest term where two overlap ("coolant level" over "coolant"); a synonym shared by
    several sensors keeps all of them, and the device decides between them later."""
    kept: list[Mention] = []
    for mention in sorted(mentions, key=lambda m: (-(m.end - m.start), m.start)):
        if all(
            mention.end <= other.start
            or mention.start >= other.end
            or (mention.start, mention.end) == (other.start, other.end)
            for other in kept
        ):
            kept.append(mention)
    return sorted(kept, key=lambda m: m.start)


def _collect(mentions: list[Mention], entities: tuple[Entity, ...]) -> Mentions:
    devices: list[str] = []
    sensors: list[tuple[str, str]] = []
    codes: list[str] = []
    unknown: list[str] = []
    near: list[tuple[str, str]] = []
    labels: list[str] = []
    code_devices: dict[str, str] = {}
    last_device: str | None = None
    for mention in mentions:
        last_device = mention.canonical if mention.label == "DEVICE" else last_device
        if mention.label == "DEVICE" and mention.meant is not None and (mention.text, mention.canonical) not in near:
            near.append((mention.text, mention.canonical))
        if mention.label == "DEVICE" and mention.canonical not in devices:
            devices.append(mention.canonical)
        elif mention.label == "SENSOR" and (mention.device_id, mention.canonical) not in sensors:
            sensors.append((mention.device_id or "", mention.canonical))
        elif mention.label == "FAULT_CODE" and mention.text not in codes:
            # As printed: the manual tool normalises and knows which spellings are one code.
            codes.append(mention.text)
            if last_device is not None:
                code_devices[mention.text] = last_device
        elif mention.label == "UNKNOWN_DEVICE" and mention.text not in unknown:
            unknown.append(mention.text)
        elif mention.label == "WIRING_LABEL" and mention.text not in labels:
            labels.append(mention.text)
    return Mentions(
        devices=devices,
        sensors=sensors,
        fault_codes=codes,
        unknown_devices=unknown,
        near_devices=near,
        wiring_labels=labels,
        code_devices=code_devices,
        entities=entities,
    )
