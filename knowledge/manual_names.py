"""Which manuals a question names: its model (`EP100`, `fr sx`), vendor (`gecko`, `DMM`,
`广州数控`), title words or file name, as technicians call the machine in front of them.

A name counts only when it is distinctive: a word shared by many products (servo, drive,
manual) names none of them.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from knowledge.ingest.metadata import version_order

_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*|[\u3400-\u9fff]{2,}")
_SEPARATOR = re.compile(r"[-_.]")
MIN_LETTERS = 3
PREFIX_LETTERS = 4  # `gecko` names `Geckodrive`, `opti` nothing
# Printed by this many manuals besides its own (or one in 50 in a large library), a word names none:
# on the 29 development manuals brands are printed by one other at most, `boiler` by 3, `pump` by 6.
GENERAL_ELSEWHERE = 2
_GENERIC_ZH = ("手册", "说明书", "使用", "用户")
# Words of document titles and kinds of equipment: they name no product. (One string reads better than
# 56 quoted words, hence the noqa.)
_GENERIC = frozenset(
    "manual manuals user guide quick quickguide instruction instructions series rev revision version "  # noqa: SIM905
    "pdf the and for with maint maintenance handbook datasheet english chinese drive drives servo "
    "motor motors spindle inverter controller control system unit amplifier stepper technology "
    "electric electronics inc ltd corporation company axis digital joint actuator alarm list "
    "error fault type code codes".split()
)


# Kinds of equipment a short series name is called by (`EV drive`, `EV inverter`): a name followed by one of them
# is kept as the name and this mark, so that `ev_inverter.pdf` is named by `EV drive` and no two-letter word alone
# names a manual.
_KINDS = frozenset(
    (
        "drive",
        "drives",
        "servo",
        "motor",
        "spindle",
        "inverter",
        "controller",
        "unit",
        "amplifier",
        "stepper",
        "actuator",
    )
)
_CJK_KINDS = ("变频器", "伺服", "驱动器", "电机", "控制器", "主轴", "逆变器")  # a run of Chinese that begins with one
_KIND = "~"
# A version as a technician types it beside the model (`CL57T V4`, `CL57T(V4.0)`, `rev 3`).
_ASKED_VERSION = re.compile(r"(?<![\w.])(?:version|ver\.?|rev\.?|v)\s?(\d+(?:\.\d+){0,2})(?![\w.])", re.I)


class ManualNames:
    """The distinctive names of an index's manuals, worked out once per index snapshot.

    `printed_in`: the manuals (sha256) whose pages print a word. A word of a file name or vendor that other
    manuals print too (`pump` of `grundfos_cr_pump.pdf`, `boiler`) is a kind of equipment, not a name: a
    question about some other pump names no manual by it. Brands and designations stay their own."""

    def __init__(
        self, manuals: Iterable[Mapping[str, Any]], printed_in: Callable[[str], set[str]] = lambda word: set()
    ):
        manuals = list(manuals)
        self._printed_in = printed_in
        self._general: dict[str, bool] = {}
        self._elsewhere = max(GENERAL_ELSEWHERE, len(manuals) // 50)
        names = {m["sha256"]: _names(m) for m in manuals}
        products: dict[tuple[str, str], set[str]] = {}
        self._product: dict[str, tuple[str, str]] = {}
        self._titles = {m["sha256"]: str(m.get("title") or m.get("file") or "") for m in manuals}
        for m in manuals:  # editions and versions of one product share their names
            key = (str(m.get("vendor") or "").lower(), str(m.get("model") or "").lower())
            products.setdefault(key, set()).update(names[m["sha256"]])
            # Editions are one product by the model read from them; a manual without one is its own.
            self._product[m["sha256"]] = key if key[1] else (m["sha256"], "")
        self._versions = {m["sha256"]: str(m["version"]) for m in manuals if m.get("version")}
        self._editions: dict[tuple[str, str], set[str]] = {}
        for sha, product in self._product.items():
            self._editions.setdefault(product, set()).add(sha)
        spread = Counter(name for product in products.values() for name in product)
        limit = max(2, len(products) // 3)
        self._names = {sha: {n for n in own if spread[n] < limit or len(products) == 1} for sha, own in names.items()}
        self._owners: dict[str, set[str]] = {}
        for sha, own in self._names.items():
            for name in own:
                self._owners.setdefault(name, set()).add(sha)
        # Indexes for the three ways a question names a manual, so a library of hundreds of
        # manuals costs a question a few lookups, not a pass over every name.
        self._sorted = sorted(n for n in self._owners if len(n) >= PREFIX_LETTERS and not _is_cjk(n))
        self._designations = [n for n in self._owners if any(c.isdigit() for c in n)]
        self._cjk = [n for n in self._owners if _is_cjk(n)]

    def mentioned(self, question: str) -> set[str]:
        """sha256 of each manual the question names, with the other editions and versions of its product (those of
        the version it gives, where an edition carries it). A product named by every word that names another, and by
        more, is the one meant: `Tidewell TW-90` names the TW-90's manuals, not those of the TW-40, which the series
        word alone names too (through its file name). A word counts for the products of its most specific names
        (those of the fewest products): `silence50` names the Silence 50's `marlow_silence_50` more than the
        `silence` every Silence manual is named by."""
        named: set[str] = set()
        naming: dict[tuple[str, str], set[str]] = {}  # product → the words that name it most specifically
        for token, names in self._naming(question).items():
            products = {name: {self._product[sha] for sha in self._owners[name]} for name in names}
            fewest = min(len(of) for of in products.values())
            for name, of in products.items():
                named |= self._owners[name]
                for product in of if len(of) == fewest else ():
                    naming.setdefault(product, set()).add(token)
        meant = {self._product[sha] for sha in named}
        meant = {
            product for product in meant if not any(naming.get(product, set()) < other for other in naming.values())
        }
        asked = _asked_versions(question)
        return {sha for product in meant for sha in self._editions_asked(product, asked)}

    def version_asked(self, question: str, mentioned: set[str] | frozenset[str]) -> str:
        """The version the question gives, as the manuals it chose print it (`V4.0` of `CL57T V4`); empty where it
        gives none of theirs."""
        asked = _asked_versions(question)
        printed = {self._versions[sha] for sha in mentioned if self._of_version(sha, asked)}
        return printed.pop() if len(printed) == 1 else ""

    def _editions_asked(self, product: tuple[str, str], asked: list[tuple[int, ...]]) -> set[str]:
        """A product's editions of the version the question gives (`V4` is the V4.0 manual, not the V3.0 one),
        else all of them: a version no edition carries says nothing about which one is meant."""
        editions = self._editions[product]
        return {sha for sha in editions if self._of_version(sha, asked)} or editions

    def _of_version(self, sha256: str, asked: list[tuple[int, ...]]) -> bool:
        printed = self._versions.get(sha256, "")
        return bool(printed) and any(_same_version(version_order(printed), version) for version in asked)

    def printing(self, word: str) -> set[str]:
        """The manuals (sha256) whose rows hold a word, as the index stores its words."""
        return self._printed_in(word)

    def title(self, sha256: str) -> str:
        """A manual's title (its file name where it has none), as a message names it."""
        return self._titles.get(sha256, "")

    def _matched(self, question: str) -> set[str]:
        return {name for names in self._naming(question).values() for name in names}

    def _naming(self, question: str) -> dict[str, set[str]]:
        """Each word of the question that names manuals, with the names it matches."""
        found = {name: {name} for name in self._cjk if name in question}
        for token in _question_tokens(question):
            found.setdefault(token, set()).update(self._named_by(token))
        named = {token: {n for n in names if not self._is_general(n)} for token, names in found.items()}
        return {token: names for token, names in named.items() if names}

    def _is_general(self, name: str) -> bool:
        """A word (no digit) that at least `_elsewhere` manuals it does not name print (any manual, for a word
        that names none)."""
        if name not in self._general:
            self._general[name] = (
                name.isalpha()
                and name.isascii()
                and len(self._printed_in(name) - self._owners.get(name, set())) >= self._elsewhere
            )
        return self._general[name]

    def _named_by(self, token: str) -> set[str]:
        """Names a token names: itself; a longer name it begins (`gecko` → geckodrive) or a shorter
        name it begins with; a designation it is part of (`980mdi` → gsk980mdi); a brand typed with part of
        one of its designations (`mks42d` → mks and servo42d); a designation after a kind of product
        (`servo57d` → 57d of `SERVO42D/57D_CAN`)."""
        found = {token} if token in self._owners else set()
        if len(token) >= PREFIX_LETTERS and token not in _GENERIC:
            start = bisect.bisect_left(self._sorted, token)
            begun = set(itertools.takewhile(lambda name: name.startswith(token), self._sorted[start:]))
            begun.update(token[:n] for n in range(PREFIX_LETTERS, len(token)) if token[:n] in self._owners)
            # A word other manuals print begins no brand: the `fire` of fire tubes is no `Fireye`. (Asked only of
            # a token that begins a name: the answer costs a word search.)
            if begun and not self._is_general(token):
                found |= begun
            if any(c.isdigit() for c in token) and not token.isdigit():
                found.update(name for name in self._designations if token in name)
                brand = re.match(r"[a-z]+", token)
                rest = token[brand.end() :] if brand else ""
                if brand and brand.group() in self._owners and len(rest) >= 2:
                    owners = self._owners[brand.group()]
                    designations = {name for name in self._designations if rest in name and self._owners[name] & owners}
                    if designations:
                        found |= {brand.group(), *designations}
                elif brand and brand.group() in _GENERIC and rest in self._designations:
                    found.add(rest)  # `servo57d`: the product family's word before its designation
        return found

    def without_names(self, question: str, mentioned: set[str] | frozenset[str] | None = None) -> str:
        """The question without the words that name a manual: once the manual is known, `FR-SX`
        says nothing about which of its pages answers (and matches its title page best). `mentioned`:
        `self.mentioned(question)`, where the caller has it already."""
        names = self._matched(question)
        if not names:
            return question
        if mentioned is None:
            mentioned = self.mentioned(question)
        # A named manual's series word, typed without its kind of equipment (`COT on the teco EV display`).
        series = {name[: -len(_KIND)] for sha in mentioned for name in self._names[sha] if name.endswith(_KIND)}
        version = self.version_asked(question, mentioned)
        kept = []
        for token in re.split(r"(\s+|[\u3400-\u9fff]+)", question):
            lowered = token.lower()
            cjk = re.fullmatch(r"[\u3400-\u9fff]+", token or " ")
            if cjk:
                for name in (n for n in names if re.fullmatch(r"[\u3400-\u9fff]+", n) and n in token):
                    token = token.replace(name, " ")
            elif lowered.strip() and (
                self._names_only(lowered, names) or lowered in series or _only_version(lowered, version)
            ):
                continue
            kept.append(token)
        rest = " ".join("".join(kept).split())
        return rest or question

    def _names_only(self, token: str, names: set[str]) -> bool:
        """Whether every part of a token names one of `names` (`FR-SX`, `EP100`), not just one part."""
        parts = {
            name
            for t in _TOKEN.findall(token)
            for name in [_SEPARATOR.sub("", t), *_SEPARATOR.split(t)]
            if len(name) >= MIN_LETTERS
        }
        return bool(parts) and all(self._named_by(part) & names for part in parts)


def _names(manual: Mapping[str, Any]) -> set[str]:
    """All of vendor, model, device and file name (a plant names its files after the machine); of
    the title only designations (with a digit) and brands set in capitals: a title's ordinary
    words (general, purpose, installation) name nothing."""
    text = " ".join(str(manual.get(key) or "") for key in ("vendor", "model", "device"))
    text += " " + re.sub(r"\.pdf$", "", str(manual.get("file") or ""), flags=re.I)
    title = [
        t
        for t in re.findall(r"[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*|[\u3400-\u9fff]{2,}", str(manual.get("title") or ""))
        if any(c.isdigit() for c in t) or (t.isupper() and len(t) >= PREFIX_LETTERS) or not t.isascii()
    ]
    out: set[str] = set()
    for token in _TOKEN.findall(f"{text} {' '.join(title)}".lower()):
        parts = _SEPARATOR.split(token)
        joined = [_SEPARATOR.sub("", token)] if not all(part in _GENERIC for part in parts) else []  # not `alarm-codes`
        # Neighbouring parts too, as a question joins its words (`festo_cmmt_as_…` is named `CMMT-AS`).
        joined += [a + b for a, b in itertools.pairwise(parts) if not (a in _GENERIC and b in _GENERIC)]
        joined += _called_by_kind(parts)
        out.update(name for name in joined + parts if _usable(name))
    return out


def _usable(name: str) -> bool:
    if re.fullmatch(r"[\u3400-\u9fff]+", name):
        return not any(word in name for word in _GENERIC_ZH) or len(name) > 6
    return (
        len(name) >= MIN_LETTERS
        and not name.isdigit()
        and name not in _GENERIC
        and not re.fullmatch(r"v?\d+(\.\d+)*", name)
    )


def _question_tokens(question: str) -> set[str]:
    every = _TOKEN.findall(question.lower())
    tokens = [t for t in every if not re.fullmatch(r"[\u3400-\u9fff]+", t)]
    joined = [a + b for a, b in itertools.pairwise(tokens)] + _called_by_kind(every)  # `fr sx` is FR-SX
    return {
        name
        for token in tokens + joined
        for name in [_SEPARATOR.sub("", token), *_SEPARATOR.split(token)]
        if len(name) >= MIN_LETTERS
    }


def _called_by_kind(words: list[str]) -> list[str]:
    """Each word followed by a kind of equipment, as a name (`ev~` of `EV drive`, `HY变频器`, and of
    `huanyang_hy_series_inverter`: a document's words between them are passed over)."""
    words = [w for w in words if w not in _GENERIC or w in _KINDS]
    return [
        a + _KIND
        for a, b in itertools.pairwise(words)
        if (b in _KINDS or b.startswith(_CJK_KINDS)) and a not in _GENERIC and a.isascii() and a.isalnum()
    ]


def _asked_versions(text: str) -> list[tuple[int, ...]]:
    return [version_order(m.group(1)) for m in _ASKED_VERSION.finditer(text)]


def _only_version(token: str, printed: str) -> bool:
    """Whether a token is the version of the manuals chosen and nothing else (`v4` of the V4.0 manual)."""
    asked = _ASKED_VERSION.fullmatch(token)
    return asked is not None and bool(printed) and _same_version(version_order(printed), version_order(asked[1]))


def _same_version(printed: tuple[int, ...], asked: tuple[int, ...]) -> bool:
    """`V4` is `V4.0` and `V4.0` is `V4`: as far as the shorter one says, they agree."""
    shorter = min(len(printed), len(asked))
    return shorter > 0 and printed[:shorter] == asked[:shorter]


def _is_cjk(name: str) -> bool:
    return bool(re.fullmatch(r"[\u3400-\u9fff]+", name))
