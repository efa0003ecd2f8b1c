"""A model's prose, sentence by sentence: the sentences that may be shown, and those refused with why.

The document's code-built sections carry the facts; a model writes only its summary. Each sentence must
pass what a whole answer passed before (its facts backed, `edge.run.grounding`; its words said by a
trusted observation item, `edge.run.sentence_support`; no order claimed that was not made) and what a
sentence may not say whatever backs it (`edge.run.claims`). A refused sentence is not shown; the
document keeps it with its reasons, and `/metrics` counts it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from edge.run.claims import (
    CLAIMED_ACTION,
    CONTRADICTS_VERDICT,
    MISATTRIBUTED_VALUE,
    SOFTENED_WAIT,
    WEAKENS_SAFETY,
    forbidden,
)
from edge.run.document import AnswerDocument, Prose, RejectedSentence, Source
from edge.run.sentence_support import UNSUPPORTED, split_sentences
from edge.run.trust import may_support
from tools.observation import Observation

_KINDS = {
    WEAKENS_SAFETY: "weakens_safety",
    SOFTENED_WAIT: "softened_wait",
    CONTRADICTS_VERDICT: "contradicts_verdict",
    CLAIMED_ACTION: "claimed_action",
    MISATTRIBUTED_VALUE: "misattributed_value",
}

# The checks one sentence must pass before a technician reads it: [] = it may be shown.
SentenceCheck = Callable[[str], list[str]]


def check_prose(text: str, doc: AnswerDocument, check: SentenceCheck, source: Source = "model") -> Prose:
    """`check`: the fact and word checks of one sentence against the run (`AnswerVerifier.sentence_problems`)."""
    sources = trusted_texts(doc)
    prose = Prose(source=source)
    for sentence in dict.fromkeys(split_sentences(text)):
        reasons = forbidden(sentence, doc, sources) + check(sentence)
        if reasons:
            prose.rejected.append(RejectedSentence(text=sentence, reasons=reasons))
        else:
            prose.sentences.append(sentence)
    return prose


def refusal_kind(reason: str) -> str:
    """A refused sentence's reason as one word, for `/metrics`."""
    if reason in _KINDS:
        return _KINDS[reason]
    return "unsupported" if reason.startswith(UNSUPPORTED) else "ungrounded"


def trusted_texts(doc: AnswerDocument) -> list[str]:
    """The manual's and the plant's own words in the document: what a sentence may echo."""
    texts = [s.text for s in doc.safety] + [s.text for s in doc.isolation]
    for entry in doc.entries:
        texts += [entry.title, entry.snippet, *entry.steps, *(cause.text for cause in entry.causes)]
    return texts


def supporting(observations: Sequence[Observation]) -> list[Observation]:
    """The observations with only the items that may back a sentence (no unverified report, nothing that
    speaks to the planner instead of about the machine)."""
    return [obs.model_copy(update={"content": [i for i in obs.content if may_support(i)]}) for obs in observations]
