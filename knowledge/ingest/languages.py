"""The languages manuals come in: how a text's language is told, and the words each language uses for what fault
reading looks for (a fault section's heading, a table's columns, a field's label). Adding a language is adding
its `Vocabulary` here; `sections.py`, `tables.py` and `records.py` read every language's words from these.

A text's language is told cheaply, without a model: Chinese by its share of CJK characters (as
`knowledge.text.language` tells a question's), a language of letters by its function words and letters
(`der`, `und`, `nicht`, `ü`: German; `the`, `and`, `is`: English; any Cyrillic letter: Russian). "Latin-script"
below means such a language, Cyrillic included, as against Chinese. A page is often two languages (a German
manual's English parameter names, a bilingual quick guide), so each passage and entry is told by itself, and a
text too short to tell (a heading, a code and its name) takes its page's language.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from knowledge.text import CJK, LETTERS

ROLES = ("code", "title", "symptom", "cause", "remedy")


@dataclass(frozen=True)
class Vocabulary:
    """One language's words. Words are matched without case; a Latin-script word only as a whole word
    (`headings`, `page_causes`, `page_remedies`, `parameters` are regular-expression fragments)."""

    language: str  # ISO 639-1
    cjk: bool = False
    # Function words that tell a Latin-script language, and a question's commonest words (`what`, `warum`,
    # `bedeutet`): a question is a sentence or less. A word two languages list tells neither.
    stop_words: frozenset[str] = frozenset()
    letters: str = ""  # letters only this language writes (`äöüß`)
    # A heading with one of these opens a fault section.
    headings: tuple[str, ...] = ()
    # A page that names both a cause and a remedy is a troubleshooting table wherever it sits, and so is one that
    # names a fault table's code column (`Error code`, `错误代码`, not `Code` or `No.`) beside either.
    page_causes: tuple[str, ...] = ()
    page_remedies: tuple[str, ...] = ()
    page_codes: tuple[str, ...] = ()
    # A field's label in running text (`Cause:`) and a table column's name: symptom, cause, remedy.
    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Further names of a table column, by role (code, title, symptom, cause, remedy): not labels of running text.
    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # A header cell over what a display shows: its messages are what a technician reads off the machine.
    messages: tuple[str, ...] = ()
    # A header with one of these heads a parameter list, or a parts list (its "No." numbers items).
    parameters: tuple[str, ...] = ()
    # How a word naming a kind of machine ends (`打印机`, printer; `Gabelstapler`, forklift): a question about one that
    # no manual holds is about another machine, where the model reading the question cannot tell.
    machine_endings: tuple[str, ...] = ()
    # The endings a column's name takes in a header (`Causes`; `Mögliche Lösungen`, `Ursachen`): a Latin-script
    # word is found with one of these or none, not running on into a longer word.
    endings: tuple[str, ...] = ()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH = Vocabulary(
    language="en",
    stop_words=_words(
        "the and of to is are be was for with this that if or not from by it its as at when then"
        " will can may should must does do has have there which"
        " what why how where who"
    ),
    # A manual's FAQ is where it answers "the motor does X": troubleshooting under another name.
    headings=(
        r"faults?",
        r"alarms?",
        r"trips?",
        r"errors?",
        r"malfunctions?",
        r"protections?",
        r"protective",
        r"troubleshoot\w*",
        r"trouble\s*shooting",
        r"troubles?",  # `Trouble Analysis`
        r"diagnos\w*",
        r"faqs?",
        r"frequently\s+asked\s+questions",
        # What each message or indication of the display means: a meter's warnings (low battery, overload).
        r"display\s+(?:messages?|indications?)",
    ),
    page_causes=(r"causes?", r"reasons?"),
    page_remedies=(r"remed(?:y|ies)", r"countermeasures?", r"corrective actions?", r"solutions?"),
    page_codes=(r"(?:fault|error|alarm|trip)\s+codes?", r"alarm\s+no\.?"),
    labels={
        "symptom": ("symptom", "symptoms", "problem", "phenomenon"),
        "cause": ("cause", "causes", "possible cause", "possible causes", "reason"),
        "remedy": (
            "remedy",
            "remedies",
            "action",
            "actions",
            "solution",
            "corrective action",
            "corrective measure",
            "corrective measures",
            "countermeasure",
            "troubleshooting",
            "recovery procedure",
        ),
    },
    columns={
        "code": ("fault code", "error code", "alarm code", "alarm no", "alarm", "code", "no."),
        # "display": the text the display shows, beside its code.
        "title": ("name", "title", "description", "message", "display", "meaning", "fault"),
        # "Possible defect": what a scanned service chart calls the cause; "Check": what a symptom's table says to
        # look at, one likely cause a row.
        "cause": ("content", "explanation", "details", "defect", "check", "checks", "check point", "inspection"),
    },
    messages=("message", "display"),
    endings=("s", "es"),
    parameters=(
        r"range",
        r"default",
        r"unit",
        r"factory setting",
        r"setting range",
        r"quantity",
        r"qty",
        r"specifications?",
    ),
)

CHINESE = Vocabulary(
    language="zh",
    cjk=True,
    # 显示屏说明: what each indication of the display means (a meter's 低电 L.BAT, 过载 O.L), as display messages.
    # 出错, 报错: an error a device reports (`出错信息`, `报错说明`; `错误` alone is also a wrong operation: `错误操作`,
    # but not as an error code, `错误码`).
    headings=(
        "故障",
        "报警",
        "警报",
        "异常",
        "保护",
        "告警",
        "出错",
        "报错",
        "错误代?码",
        "常见问题",
        r"显示[屏器]?的?说明",
    ),
    page_causes=("原因",),
    page_remedies=("处理方法", "处理措施", "对策", "解决方法"),
    page_codes=("故障代码", "错误代码", "报警代码", "故障码", "错误码", "报警号"),
    machine_endings=("机", "车", "器", "泵", "炉", "库", "梯"),  # 打印机, 叉车, 冷库, 电梯
    labels={
        "symptom": ("现象", "故障现象", "症状"),
        "cause": ("原因", "故障原因", "可能原因"),
        "remedy": ("处理方法", "处理办法", "处理", "排除方法", "解决方法", "措施", "对策", "解除", "报警解除"),
    },
    columns={
        "code": ("代码", "故障代码", "报警号", "错误代码", "编号", "故障码", "错误码", "报警代码"),
        "title": ("名称", "描述", "故障名称", "内容", "含义", "意义"),
    },
    messages=("显示", "提示"),
    parameters=("范围", "缺省", "默认", "出厂", "单位", "数量", "规格"),
)

# German manuals head their fault lists Störungen (faults), Fehler (errors) or Fehlerbehebung, and print
# `Störung | Ursache | Abhilfe` tables; words run together (`Fehlercode`, `Störungsursache`), and a column word
# is found inside a header cell (`Fehlerursache` says `ursache`).
GERMAN = Vocabulary(
    language="de",
    stop_words=_words(
        "der die das und ist nicht mit für den dem des ein eine einen einer zu von bei auf im wird werden sind"
        " oder wenn sie auch nach aus kein keine über durch wurde sich nur noch ob"
        " wie warum wieso weshalb welche welcher welches wo wann ich man kann muss soll am zum zur bedeutet tun zeigt"
    ),
    letters="äöüß",
    headings=(
        r"fehler(?:n|meldung(?:en)?|behebung|beseitigung|liste|codes?|suche|diagnose|anzeigen?|ursachen?)?",
        r"(?:betriebs)?störung(?:en|smeldung(?:en)?|sbehebung|sbeseitigung|sanzeigen?|sliste)?",
        r"fehlfunktion(?:en)?",
        r"alarm(?:e|meldung(?:en)?)?",
        r"diagnose",
        r"problembehebung",
    ),
    page_causes=(r"ursachen?",),
    page_remedies=(r"abhilfe(?:maßnahmen?)?", r"fehlerbehebung", r"störungsbehebung", r"störungsbeseitigung"),
    page_codes=(r"fehlercodes?", r"fehler-?nr\.?", r"fehlernummer", r"störungscodes?"),
    # A compound's last word says what it is: `Schraubenkompressor`, `Gabelstapler`, `Geschirrspüler`.
    machine_endings=(
        "maschine",
        "kompressor",
        "pumpe",
        "stapler",
        "anlage",
        "fahrzeug",
        "drucker",
        "bagger",
        "aufzug",
        "spüler",
        "automat",
    ),
    labels={
        "symptom": ("symptom", "fehlerbild", "störungsbild", "erscheinung"),
        "cause": ("ursache", "ursachen", "mögliche ursache", "mögliche ursachen"),
        "remedy": ("abhilfe", "maßnahme", "maßnahmen", "behebung", "beseitigung", "lösung"),
    },
    columns={
        "code": ("fehlercode", "fehler-nr.", "fehlernummer", "störungscode", "code", "nr."),
        "title": (
            "störung",
            "störungen",
            "störungsmeldung",
            "fehler",
            "fehlermeldung",
            "meldung",
            "anzeige",
            "bezeichnung",
            "beschreibung",
            "bedeutung",
        ),
        "cause": ("prüfung", "prüfen", "kontrolle"),
    },
    messages=("meldung", "anzeige"),
    # A noun's plural and case endings: `Lösung` / `Lösungen`, `Ursache` / `Ursachen`, `Fehler` / `Fehlern`.
    endings=("n", "en", "s", "es", "e"),
    parameters=(r"einstellbereich", r"wertebereich", r"werkseinstellung", r"standardwert", r"technische daten"),
)

# Russian manuals (and the Russian editions of Chinese equipment's) head their lists Неисправности (faults), Ошибки
# (errors) or Аварии (alarms) and print `Код ошибки | Описание` and `Неисправность | Причина | Способ устранения`
# tables; a noun's case endings are many (`ошибка`, `ошибки`, `ошибок`), so headings match a stem.
RUSSIAN = Vocabulary(
    language="ru",
    stop_words=_words(
        "и в во не на что с со по для как это при если или от до из за же то так бы ли но уже"
        " почему какой какая какие где когда который которая можно нужно надо"
    ),
    letters="абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    headings=(
        r"неисправност\w*",
        r"ошибк\w*",
        r"ошибок",
        r"авари\w*",
        r"сбо\w*",
        r"диагностик\w*",
        r"устранени\w* неисправност\w*",
    ),
    page_causes=(r"причин\w*",),
    page_remedies=(r"устранени\w*", r"способ\w* устранения", r"решени\w*"),
    page_codes=(r"код\w* ошиб\w*", r"код\w* неисправност\w*", r"код\w* аварии"),
    labels={
        "symptom": ("неисправность", "признак", "признаки", "проявление"),
        "cause": ("причина", "причины", "возможная причина", "возможные причины"),
        "remedy": ("способ устранения", "устранение", "решение", "действия", "меры"),
    },
    columns={
        "code": ("код ошибки", "код неисправности", "код аварии", "код", "№"),
        "title": ("описание", "наименование", "значение", "сообщение", "индикация"),
    },
    messages=("сообщение", "индикация"),
    endings=("а", "и", "ы", "е", "у", "ов", "ей"),
    parameters=(r"диапазон\w*", r"по умолчанию", r"единиц\w*", r"заводск\w*"),
)

VOCABULARIES = (ENGLISH, CHINESE, GERMAN, RUSSIAN)
LANGUAGES = tuple(v.language for v in VOCABULARIES)
DEFAULT = ENGLISH.language
# A text with fewer function words (and own letters) than this, or fewer for its words (no CJK), cannot be told:
# it takes its page's language. Prose is a third function words; a program listing's `if` and `for` among its
# identifiers, or a table of parameter names, are a few in a hundred (C code in a Chinese manual had been English).
MIN_WORDS = 3
MIN_WORD_SHARE = 0.1
# Chinese when this share of a text's letters are CJK (as `knowledge.text.language` tells a question's).
CJK_SHARE = 0.2
# A page or manual is also in a language that holds this share of its text.
LANGUAGE_SHARE = 0.2


def pattern(words: tuple[str, ...], cjk: tuple[str, ...] = ()) -> re.Pattern[str]:
    """One expression for Latin-script fragments (as whole words) and CJK ones (anywhere)."""
    parts = [rf"\b(?:{'|'.join(words)})\b"] if words else []
    return re.compile("|".join(parts + list(cjk)), re.I)


def every(name: str) -> re.Pattern[str]:
    """An expression for one of a vocabulary's regular-expression fields (`headings`, `page_causes`…), every
    language's words."""
    latin = tuple(w for v in VOCABULARIES if not v.cjk for w in getattr(v, name))
    cjk = tuple(w for v in VOCABULARIES if v.cjk for w in getattr(v, name))
    return pattern(latin, cjk)


MACHINE_ENDINGS = tuple(ending for v in VOCABULARIES for ending in v.machine_endings)


def words_of(role: str) -> tuple[str, ...]:
    """Every language's labels of a field (symptom, cause, remedy) in running text (`Cause:`, `原因：`)."""
    return tuple(dict.fromkeys(w for v in VOCABULARIES for w in v.labels.get(role, ())))


def column_names(role: str) -> re.Pattern[str]:
    """Every language's names of a table column with a role (its field's labels and its further column names):
    a Chinese word anywhere in a header cell, a Latin-script one with one of its language's endings or none
    (`Lösungen`), not running on into a longer word (`display` is no "Where Displayed" column) but run together
    with the word before it (`ErrorCode`, `Fehlercode`, `Störungsursache`)."""
    latin: list[str] = []
    cjk: list[str] = []
    for v in VOCABULARIES:
        names = (*v.labels.get(role, ()), *v.columns.get(role, ()))
        if v.cjk:
            cjk += map(re.escape, names)
        else:
            endings = "|".join(v.endings)
            latin += [rf"{re.escape(name)}(?:{endings})?" if endings else re.escape(name) for name in names]
    parts = [rf"(?:{'|'.join(latin)})(?![a-zäöüßа-яё])"] if latin else []
    return re.compile("|".join(parts + cjk))


def detect(text: str, fallback: str = "") -> str:
    """A text's language: `zh` by its CJK share, else the Latin-script language whose function words and letters
    it holds most; `fallback` (else English) for a text too short to tell."""
    return tell(text) or fallback or DEFAULT


def shares(texts: list[str]) -> dict[str, float]:
    """Each language's share of some texts (each text weighed by its length, told by itself; a text too short
    to tell counts for none), largest first."""
    weights: Counter[str] = Counter()
    for text in texts:
        if language := tell(text):
            weights[language] += len(text)
    total = sum(weights.values())
    return {language: weight / total for language, weight in weights.most_common()} if total else {}


def languages_of(texts: list[str], fallback: str = "") -> list[str]:
    """The languages of some texts (a manual's pages), largest first: each that holds `LANGUAGE_SHARE` of them,
    at least the largest; `[fallback or English]` when none can be told."""
    found = shares(texts)
    kept = [language for n, (language, share) in enumerate(found.items()) if n == 0 or share >= LANGUAGE_SHARE]
    return kept or [fallback or DEFAULT]


def question_language(text: str) -> str:
    """A question's language: `zh` by its CJK share, else the Latin-script language whose words and letters it
    holds more of than any other's, English when none does. A question is a sentence or less, so one word tells
    it (`Was tun bei E07?`, `Fehler am Motor`); a German name in an English question (`Vorlauffühler`) is
    outweighed by the question's English words."""
    return tell(text, 1, 0.0) or DEFAULT


# A manual's pages are told twice: for the manual's languages, then each page's with that as its fallback.
@lru_cache(maxsize=1024)
def tell(text: str, min_words: int = MIN_WORDS, min_share: float = MIN_WORD_SHARE) -> str:
    """A text's language, or "" when it says too little to tell (no CJK share, and too few function words or own
    letters: `min_words`, `min_share` of its words). A tie is English's."""
    folded = text.casefold()
    words = _LATIN_WORD.findall(folded)
    cjk = len(CJK.findall(text))
    letters = sum(map(len, words)) + cjk
    if letters and cjk / letters > CJK_SHARE:
        return CHINESE.language
    counts: Counter[str] = Counter()
    for language, telling, own_letters in _LATIN:
        told = sum(map(telling.__contains__, words))
        told += len(own_letters.findall(folded)) if own_letters is not None else 0
        if told:
            counts[language] = told
    if not counts:
        return ""
    language = max(counts, key=lambda told: (counts[told], told == DEFAULT))
    return language if sum(counts.values()) >= min_words and counts[language] >= min_share * len(words) else ""


def _telling(vocabulary: Vocabulary) -> frozenset[str]:
    """A Latin-script language's words that no other such language lists (`was` is English and German)."""
    others = [v.stop_words for v in VOCABULARIES if not v.cjk and v is not vocabulary]
    return vocabulary.stop_words.difference(*others)


_LATIN_WORD = re.compile(f"[{LETTERS}]+")
_LATIN = [
    (v.language, _telling(v), re.compile(f"[{v.letters}]") if v.letters else None) for v in VOCABULARIES if not v.cjk
]
