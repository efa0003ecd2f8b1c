"""Is every sentence of an answer said by some observation? The check for words, beside `edge.run.grounding`'s for facts.

The grounding check backs codes, numbers, ids, manuals and pages; a language model can still give a real
code an invented meaning ("E102 means the door is open") or tell the technician something no observation
says ("you can bypass the interlock"). So each sentence of a planner's final answer must be said by one
observation item: its words, not only its facts.

A sentence's claim words are its content words (English lower-cased and lightly stemmed, Chinese cut by
the knowledge package's jieba segmenter, glossary concepts as one word in either language) without
function words, codes, ids and numbers (`edge.run.grounding` checks those), and without the plant's machine
names, its units and a few generic answer words (`SCAFFOLDING`): naming the machine or saying "check the
manual" claims nothing. A sentence is supported when one observation item (its text
and its fields' values; a manual step counts for the code of its entry) backs at least `THRESHOLD` of
its claim words, or, failing that, every clause of it is backed so (a model joins an entry's title and
a step into one sentence). What the technician said (the question, the session) may fill in as many
claim words as the item itself backs, never more: an answer that only repeats the question ("can I
bridge the valve monitoring?") is not backed by it. Further:
- a sentence that names a code is backed only by items about that code, or about none (a reading);
- a negative or limiting sentence ("do not", "without", "only", "不用") needs an item that is one too,
  or a call that failed or found nothing (what could not be checked);
- a plain sentence that restates a negative or limiting clause of an observation without its
  "not" or "only" contradicts it ("bridge the valve monitoring" against "do not bridge the valve
  monitoring"), however well its words are backed.
Bag-of-words support does not read grammar: a sentence that recombines an item's own words into
another claim, or a correct paraphrase in other words (antonyms, synonyms outside the glossary), is
beyond it. `scripts/bench_sentence_support.py` measures both sides and chose `THRESHOLD`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from knowledge.glossary import concepts, mentions
from knowledge.text import CJK, chinese_words, stem
from tools.observation import Observation
from tools.plant import DeviceConfig


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Every problem the check reports starts so (the loop's rejected answers, /metrics count them by it).
UNSUPPORTED = "unsupported sentence: "
SENTENCE_SHOWN_CHARS = 160
# The share of a sentence's claim words one item must back; chosen on half the regression cases by
# scripts/bench_sentence_support.py, which reports the other half.
THRESHOLD = 0.65
# A sentence repeats the question when this share of its words (at least ECHO_MIN_WORDS) are the question's in
# its order: the model wrote the question back (Qwen2.5-Coder-0.5B did in 3 of 43 runs).
ECHO_SHARE = 0.8
ECHO_MIN_WORDS = 4
ECHO = " — it repeats the question"
_ECHO_WORDS = re.compile(rf"[a-z0-9]+|{CJK.pattern}")
# A limiting clause of an observation is restated when this share of its words, and at least two, recur
# in one clause of the sentence.
RESTATED_SHARE = 0.75

# Words any answer uses to point at its sources and its form, about no machine in particular.
SCAFFOLDING = (
    "answer manual page step reading value order work ticket open new create check see follow mean "
    "fault code sensor machine device status priority current show "
    "答案 手册 页 步骤 读数 读取 数值 实时 缓存 工单 开 创建 检查 查看 参见 按照 表示 意思 处理 故障 代码 传感器 设备 机器 状态 优先级 当前 目前 现在 此刻 显示"
)
# English closed-class words: articles, pronouns, prepositions, conjunctions, auxiliaries and modals,
# sequence words. Not spaCy's stop list: it also holds words an instruction turns on ("off", "keep",
# "top", "empty", "move").
_EN_FUNCTION = _word_set(
    """a an the this that these those it its they them their there here he she him her his we you your i me my our
    us who whom whose which what when where why how whether be is are was were been being am do does did done doing
    have has had having will would shall should can could may might must need needs let lets to of in on at by for
    with from into onto about as than then so if or and but because since while until till before after also just
    very too again once please both each every all any some such same other another more most less via per now
    first next finally already yet still ever either myself yourself itself ourselves themselves"""
)
_EN_LIMITING = _word_set("not no never none nothing nobody neither nor without cannot unable only")
# Chinese function words and particles; single characters of a word jieba keeps whole are not affected.
_ZH_FUNCTION = _word_set(
    """的 地 得 了 着 过 是 在 和 与 或 或者 及 以及 其 并 并且 也 都 就 还 又 再 请 吗 呢 吧 啊 把 被 将 对 从 向 于 以
    而 则 若 如果 如 时 后 前 之 该 此 这 那 个 一 您 你 我 我们 它 已 已经 先 然后 即 应 应该 可 可以 能 会 要 需要
    进行 一下 等 由 为 中 上 下"""
)
_ZH_LIMITING = _word_set(
    """不 没 没有 无 未 别 勿 莫 禁止 严禁 不要 不得 不可 不能 不用 不必 无需 无须 无法 切勿 请勿 不会 未能 不足
    只 仅 只有 只能 仅限"""
)
_MANUAL_NAME = re.compile(r"[\w.\-]+\.pdf\b", re.I)
# When a reading is, not what it says: "at the moment" and "right now" claim nothing a reading must back
# (Qwen2.5-Coder-0.5B's "The oil_temp on press-3 right now is 43.2°C" was refused for "right" alone).
_NOW = re.compile(r"\b(?:right now|just now|at the moment|at present|currently|presently)\b")
# A parenthesis that cites (a manual, a page, a version) is a reference, not content.
_CITATION = re.compile(r"[(（][^()（）]*?(?:\.pdf|\bpp?\.\s*\d|第\s*\d+\s*页|\bV\d)[^()（）]*[)）]", re.I)
_ENUMERATOR = re.compile(r"(?:^|(?<=\n)|(?<=[.;:!?。；：！？])|(?<=[.;:!?。；：！？]\s))[ \t]*\d{1,2}(?:[.)](?=\s)|、)")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]|\n")
# Periods that end an abbreviation, not a sentence: always ("e.g. E102"), or before a number ("p. 2", "max. 240 bar").
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|vs|etc|approx|ca|cf)$", re.I)
_ABBREVIATION_BEFORE_NUMBER = re.compile(r"\b(?:p|pp|max|min|no|nr|fig)$", re.I)
_LIMITING_HINT = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|cannot|unable|only)\b|n't|[不没无未别勿莫禁只仅]", re.I
)
_CLAUSE = re.compile(r"[,;:，；：、]|\s[—–-]\s|—")
# A "not" limits its own clause only: "blocked or not aligned" does not deny the blocking.
_LIMIT_CLAUSE = re.compile(r"[,;:.，；：。、]|\b(?:and|or)\b|或者|或|和|并|及|\s[—–-]\s")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")
_LATIN_CHUNK = re.compile(r"[a-z0-9'’_\-+]+(?:[.:/][a-z0-9'’_\-+]+)*")
_LETTERS = re.compile(r"[a-z]+")
_CONTRACTION = (("won't", "will not"), ("can't", "can not"), ("n't", " not"), ("won’t", "will not"), ("n’t", " not"))


@dataclass(frozen=True)
class Judgement:
    sentence: str
    # The best share of its claim words one observation item backs (1.0: it claims nothing).
    support: float
    # It restates a negative or limiting clause of an observation without the "not".
    contradicts: bool = False

    def supported(self, threshold: float = THRESHOLD) -> bool:
        return not self.contradicts and self.support >= threshold


@dataclass(frozen=True)
class _Token:
    """One claim word, by the keys that back it: a stem (`w:`), a glossary concept (`c:`), Chinese (`z:`)."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class _Bag:
    keys: frozenset[str]
    zh: str  # Chinese is compared by substring: jieba may cut a word apart in one text and not in another
    # A long text (an observation item) is not read for the whole glossary: each concept a sentence
    # names is looked up in it instead, which is far cheaper.
    text: str = ""
    concepts_read: bool = True

    def backs(self, token: _Token) -> bool:
        for key in token.keys:
            kind, value = key[:2], key[2:]
            if kind == "z:":
                if value in self.zh:
                    return True
            elif kind == "c:" and not self.concepts_read:
                if _mentions(self.text, value):
                    return True
            elif key in self.keys:
                return True
        return False


@dataclass(frozen=True)
class _Text:
    tokens: tuple[_Token, ...]
    bag: _Bag
    limiting: bool


@dataclass(frozen=True)
class _Unit:
    """What one observation item says, as the check reads it."""

    bag: _Bag
    codes: frozenset[str]
    # Backs a negative sentence: it is one itself, or its call failed or found nothing.
    negative: bool
    limiting_clauses: tuple[_Text, ...]


def plant_vocabulary(devices: dict[str, DeviceConfig]) -> frozenset[str]:
    """The names of the plant's machines (ids, names, vendors, models, synonyms) and its sensors' units.

    Not the sensors' labels, unlike the grounding check's vocabulary (`edge.run.grounding`): "oil", "coolant",
    "spindle" are what a fault's meaning is made of, and an entry's title swapped for another's hid behind
    them; a reading or the manual backs them where the answer uses them rightly.
    """
    names: set[str] = set()
    for device in devices.values():
        names.update({device.id, device.name, device.name_zh, device.vendor, device.model, *device.synonyms})
        names.update(sensor.unit for sensor in device.sensors.values())
    return frozenset(name for name in names if name)


def unsupported_sentences(
    answer: str,
    observations: Iterable[Observation],
    told: Sequence[str] = (),
    vocabulary: frozenset[str] = frozenset(),
) -> list[str]:
    """The sentences of `answer` no observation item supports, as written; [] = every one is."""
    return [j.sentence for j in judge(answer, observations, told, vocabulary) if not j.supported()]


def sentence_problems(
    answer: str, observations: Iterable[Observation], told: Sequence[str], vocabulary: frozenset[str]
) -> list[str]:
    """`unsupported_sentences` as verification problems: the prefix, each sentence cut to be readable; and
    a sentence that repeats the question (`told[0]`), which no observation says whatever backs its words."""
    out = []
    unsupported = unsupported_sentences(answer, observations, told, vocabulary)
    echoes = [s for s in split_sentences(answer) if told and s not in unsupported and repeats(s, told[0])]
    for sentence in unsupported + echoes:
        shown = sentence if len(sentence) <= SENTENCE_SHOWN_CHARS else sentence[: SENTENCE_SHOWN_CHARS - 1] + "…"
        out.append(UNSUPPORTED + shown + (ECHO if sentence in echoes else ""))
    return out


def repeats(sentence: str, question: str) -> bool:
    """Whether `sentence` is the question said again ("The press3 tripped on E101 again, overload relay
    popped." for "press3 tripped on E101 again, overload relay popped. wat now"): most of its words are the
    question's, in the question's order."""
    said, asked = _ECHO_WORDS.findall(sentence.lower()), _ECHO_WORDS.findall(question.lower())
    if len(said) < ECHO_MIN_WORDS:
        return False
    shared = sum(block.size for block in SequenceMatcher(None, said, asked, autojunk=False).get_matching_blocks())
    return shared >= ECHO_SHARE * len(said)


def judge(
    answer: str, observations: Iterable[Observation], told: Sequence[str] = (), vocabulary: frozenset[str] = frozenset()
) -> list[Judgement]:
    """How well each sentence of `answer` is supported (once per distinct sentence, in order)."""
    units = list(_units(observations))
    codes = sorted({code for unit in units for code in unit.codes}, key=len, reverse=True)
    generic = _generic(vocabulary)
    told_bag = _bag(" \n ".join(told), codes)
    judgements = []
    for sentence in dict.fromkeys(split_sentences(answer)):
        judgements.append(_judge(sentence, units, codes, generic, told_bag))
    return judgements


def split_sentences(answer: str) -> list[str]:
    """The sentences of an answer: at sentence punctuation and line ends; each list item is one."""
    text = _ENUMERATOR.sub("\n", answer)
    sentences = []
    start = 0
    for end in _SENTENCE_END.finditer(text):
        if end.group(0) == "." and _abbreviation(text[start : end.start()], text[end.end() :]):
            continue
        sentences.append(text[start : end.end()])
        start = end.end()
    sentences.append(text[start:])
    return [" ".join(s.split()) for s in sentences if _has_words(s)]


def _abbreviation(before: str, after: str) -> bool:
    if _ABBREVIATION.search(before):
        return True
    return bool(_ABBREVIATION_BEFORE_NUMBER.search(before)) and after.lstrip()[:1].isdigit()


def _judge(sentence: str, units: list[_Unit], codes: list[str], generic: _Bag, told: _Bag) -> Judgement:
    content = _CITATION.sub(" ", sentence)
    clauses = [c for c in _CLAUSE.split(content) if _has_words(c)]
    read = [_read(clause, codes) for clause in clauses]
    if any(not clause.limiting and _restates_a_limit(clause, units) for clause in read):
        return Judgement(sentence, 0.0, contradicts=True)
    named = _named(content, codes)  # "E210: spindle vibration too high": each clause is about E210
    whole = _support(_read(content, codes), named, units, generic, told)
    if whole >= 1.0 or len(clauses) < 2:
        return Judgement(sentence, whole)
    parts = min(_support(clause, named, units, generic, told) for clause in read)
    return Judgement(sentence, max(whole, parts))


def _support(text: _Text, named: set[str], units: list[_Unit], generic: _Bag, told: _Bag) -> float:
    claims = [token for token in dict.fromkeys(text.tokens) if not generic.backs(token)]
    if not claims:
        return 1.0
    best = 0.0
    for unit in units:
        if (named and unit.codes and not unit.codes & named) or (text.limiting and not unit.negative):
            continue
        own = sum(unit.bag.backs(token) for token in claims)
        filled = sum(not unit.bag.backs(token) and told.backs(token) for token in claims)
        best = max(best, (own + min(own, filled)) / len(claims))
    return best


def _restates_a_limit(clause: _Text, units: list[_Unit]) -> bool:
    for unit in units:
        for limit in unit.limiting_clauses:
            theirs = set(limit.tokens)
            restated = sum(clause.bag.backs(token) for token in theirs)
            if restated >= 2 and restated >= RESTATED_SHARE * len(theirs):
                return True
    return False


def _named(text: str, codes: list[str]) -> set[str]:
    return {code for code in codes if _code_pattern(code).search(text)}


@lru_cache(maxsize=4096)
def _code_pattern(code: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9_]){re.escape(code)}(?![a-z0-9_])", re.I)


# Quotes, not apostrophes ("isn't", "the machine's"): a quote mark with no letter outside it.
_QUOTED = re.compile(r"(?<![^\W\d_])(?:'[^'\n]*'|\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’)(?![^\W\d_])")


def _units(observations: Iterable[Observation]) -> Iterator[_Unit]:
    for obs in observations:
        failed = obs.status in ("error", "not_found")
        code: str | None = None
        for item in obs.content:
            if item.kind != "step":  # a manual's steps follow the entry they belong to
                code = str(item.fields.get("fault_code") or "") or None
            # What a failed call quotes back is what it was asked ("No manual section matches 'the weather
            # is cloudy'"): the asker's words, no fact (a model searched its own claim, then cited the echo).
            said = _QUOTED.sub(" ", item.text) if failed else item.text
            text = " \n ".join([said, *_field_texts(item.fields)])
            yield _unit(text, code, failed, instruction=item.kind == "step")
        if obs.suggestion:
            yield _unit(obs.suggestion, None, failed, instruction=False)


def _unit(text: str, code: str | None, failed: bool, instruction: bool) -> _Unit:
    codes = [code] if code else []
    limiting = [
        clause
        for part in _LIMIT_CLAUSE.split(text)
        if _LIMITING_HINT.search(part) and (clause := _read(part, codes)).limiting
    ]
    return _Unit(
        _bag(text, codes),
        frozenset(c.lower() for c in codes),
        bool(limiting) or failed,
        # A prohibition is an instruction's; a negative description ("the switch has no power") is
        # what a plain instruction may well name ("check the switch's power supply").
        tuple(clause for clause in limiting if clause.tokens) if instruction else (),
    )


def _field_texts(fields: dict[str, Any]) -> Iterator[str]:
    """A field's value, and its name where the name says what the value is ("alarm": "high", "created")."""
    for key, value in fields.items():
        if value is True:
            yield key.replace("_", " ")
        elif isinstance(value, str) and value and not (key.endswith("_id") and value.isalnum()):
            yield f"{key.replace('_', ' ')}: {value}"
        elif isinstance(value, (list, tuple)):
            yield from (str(v) for v in value if isinstance(v, str))


@lru_cache(maxsize=64)
def _generic(vocabulary: frozenset[str]) -> _Bag:
    return _bag(" \n ".join([SCAFFOLDING, *sorted(vocabulary)]), ())


def _read(text: str, codes: Iterable[str]) -> _Text:
    """A sentence or a clause: its claim-word candidates (glossary concepts as one word each), the bag
    that backs words, and whether it limits."""
    return _read_normalized(_normalize(text), tuple(c.lower() for c in codes))


@lru_cache(maxsize=8192)
def _read_normalized(text: str, codes: tuple[str, ...]) -> _Text:
    text = _without_facts(text, codes)
    tokens: list[_Token] = []
    keys = {f"w:{stem(word)}" for word in _latin_words(text)}  # words inside a concept's span back words too
    rest = list(text)
    for start, end, name in concepts(text):
        span = text[start:end]
        alternatives = [f"c:{name}"]
        if CJK.search(span):
            alternatives.append(f"z:{span}")
        elif _LETTERS.fullmatch(span):
            alternatives.append(f"w:{stem(span)}")
        tokens.append(_Token(tuple(alternatives)))
        keys.add(f"c:{name}")
        rest[start:end] = " " * (end - start)
    remaining = "".join(rest)
    limiting = False
    for word in _latin_words(remaining):
        if word in _EN_LIMITING:
            limiting = True
        elif word not in _EN_FUNCTION and len(word) > 1:
            tokens.append(_Token((f"w:{stem(word)}",)))
    for word in chinese_words(remaining) if CJK.search(remaining) else ():
        if not CJK.search(word):
            continue
        if word in _ZH_LIMITING or word[0] in "不未无没勿":
            limiting = True
        elif word not in _ZH_FUNCTION:
            tokens.append(_Token((f"z:{word}",)))
    return _Text(tuple(tokens), _Bag(frozenset(keys), _cjk_runs(text)), limiting)


def _bag(text: str, codes: Iterable[str]) -> _Bag:
    """What a long text (an observation item, the vocabulary) backs, read without the glossary or jieba."""
    return _bag_normalized(_normalize(text), tuple(c.lower() for c in codes))


@lru_cache(maxsize=8192)
def _bag_normalized(text: str, codes: tuple[str, ...]) -> _Bag:
    text = _without_facts(text, codes)
    keys = frozenset(f"w:{stem(word)}" for word in _latin_words(text))
    return _Bag(keys, _cjk_runs(text), text, concepts_read=False)


def _without_facts(text: str, codes: tuple[str, ...]) -> str:
    text = _MANUAL_NAME.sub(" ", _NOW.sub(" ", text))
    for code in codes:  # a code is a fact, checked by the grounding check; its letters are no words
        text = _code_pattern(code).sub(" ", text)
    return text


def _cjk_runs(text: str) -> str:
    return "|".join(_CJK_RUN.findall(text))


@lru_cache(maxsize=65536)
def _mentions(text: str, concept: str) -> bool:
    return mentions(text, concept)


def _latin_words(text: str) -> Iterator[str]:
    for chunk in _LATIN_CHUNK.findall(text):
        # Codes, values, ids, versions and sensor ids are facts (the grounding check's), not words.
        if not any(c.isdigit() or c == "_" for c in chunk):
            yield from _LETTERS.findall(chunk)


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text.lower())
    for short, long in _CONTRACTION:
        text = text.replace(short, long)
    return text


def _has_words(text: str) -> bool:
    return any(c.isalpha() for c in text)
