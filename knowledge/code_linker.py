"""The spaCy linker: code mentions in text become FAULT_CODE entities with a canonical id.

Kept apart from `knowledge.codes` because importing spaCy costs about a second
(it pulls in torch): the service must be ready before that, so only what
needs entities imports this module.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import spacy
from spacy.language import Language
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from knowledge.codes import LABEL, MENTION, canonical_id, common_word, typed_forms


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    code: str
    canonical_id: str


class CodeLinker:
    """spaCy blank pipelines that mark code mentions as FAULT_CODE entities with a canonical kb_id.

    `spacy.blank("zh")` splits every character, so codes are found on the raw
    text and mapped onto tokens with `doc.char_span`; codes the index already
    knows (bare numbers like `6065` included) are also matched with a PhraseMatcher, as printed or
    typed without their separators (`bb` for `b.b.`).
    """

    def __init__(self, known_codes: Iterable[str] = ()):
        self._pipelines = {lang: _pipeline(lang) for lang in ("en", "zh")}
        self._matchers: dict[str, PhraseMatcher] = {}
        self._printed = frozenset(known_codes)
        codes = sorted(typed_forms(self._printed))
        for lang, nlp in self._pipelines.items():
            matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
            matcher.add(LABEL, [nlp.make_doc(code) for code in codes])
            self._matchers[lang] = matcher

    def doc(self, text: str, language: str) -> Doc:
        nlp = self._pipelines["zh" if language == "zh" else "en"]
        doc = nlp(unicodedata.normalize("NFKC", text))
        matcher = self._matchers["zh" if language == "zh" else "en"]
        known = [
            Span(doc, start, end, label=LABEL, kb_id=canonical_id(doc[start:end].text))
            for _, start, end in matcher(doc)
            if _standalone(doc, start, end)
            and not common_word(doc[start:end].text, self._printed, doc.text[: doc[start].idx])
        ]
        doc.ents = filter_spans(list(doc.ents) + known)
        return doc

    def mentions(self, text: str, language: str) -> list[Mention]:
        return [
            Mention(span.start_char, span.end_char, span.text, span.kb_id_)
            for span in self.doc(text, language).ents
            if span.label_ == LABEL
        ]


def _standalone(doc: Doc, start: int, end: int) -> bool:
    """A known code inside a longer run (`16065`, `E1021`) is not a mention of it."""
    text = doc.text
    begin, finish = doc[start].idx, doc[end - 1].idx + len(doc[end - 1].text)
    return not (begin > 0 and text[begin - 1].isalnum() and not _is_cjk(text[begin - 1])) and not (
        finish < len(text) and text[finish].isalnum() and not _is_cjk(text[finish])
    )


def _is_cjk(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff"


def _link_codes(doc: Doc) -> Doc:
    spans = []
    for match in MENTION.finditer(doc.text):
        group = "bare" if match.group("bare") else "cued"
        # A cued span keeps its cue (`ALARM 1`): the cue may be part of the code; lookup_keys tries both.
        span = doc.char_span(
            match.start(), match.end(), label=LABEL, kb_id=canonical_id(match.group(group)), alignment_mode="expand"
        )
        if span is not None:
            spans.append(span)
    doc.ents = filter_spans(spans)
    return doc


Language.component("fault_code_linker", func=_link_codes)


@cache
def _pipeline(lang: str) -> Language:
    nlp = spacy.blank(lang)
    nlp.add_pipe("fault_code_linker")
    return nlp
