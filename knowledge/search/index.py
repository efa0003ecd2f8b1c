"""`ManualIndex`: the manual search's one entrance, and the route a question takes through its stages."""

from __future__ import annotations

from pathlib import Path

from knowledge.embed import Embedder
from knowledge.glossary import expand
from knowledge.models import SafetyStatement, Scope, SearchResult
from knowledge.search.candidates import Candidates, Mode, gather
from knowledge.search.floors import (
    codes_the_machine_lacks,
    codes_the_machine_prints,
    numbers_the_machine_skips,
    only_unknown_codes,
)
from knowledge.search.hits import code_not_found, collapse, no_section, others_marked, prefer, version_not_found
from knowledge.search.lookup import look_up, look_up_codes, near_codes, on_scanned_pages
from knowledge.search.question import Question
from knowledge.search.ranking import Opinion, opinion_weight, rank
from knowledge.search.second_opinion import SecondOpinion
from knowledge.search.store import IndexMissing, Snapshot, Store
from knowledge.text import terms
from knowledge.tuning import Tuning, tuning_for


class ManualIndex:
    """`semantic_languages`: the languages the embedding model understands. The bundled
    all-MiniLM-L6-v2 is English-only: its vote on a Chinese query is noise that
    outranks good keyword matches, so other languages are searched lexically.
    `second_opinion`: a second encoder reorders the best candidates of a search by words and meaning
    (`second_opinion.py`); the index must have been built with its vectors."""

    def __init__(
        self,
        path: Path,
        model_path: str | None = None,
        embedder: Embedder | None = None,
        semantic_languages: tuple[str, ...] = ("en",),
        tuning: Tuning | None = None,
        second_opinion: bool = False,
    ):
        self.path = Path(path)
        self.embedder = embedder or Embedder(model_path)
        self.semantic_languages = semantic_languages
        self.tuning = tuning or tuning_for(self.embedder.identity)
        self._store = Store(self.path, self.embedder.identity)
        self.second_opinion = SecondOpinion() if second_opinion else None

    def query(self, text: str, scope: Scope | None = None, version: str | None = None, k: int = 3) -> SearchResult:
        """Free text as a technician types it: a code in it is looked up exactly, the rest searched.
        Codes printed in a usual shape are found without spaCy, so a cold `fixloop search E102`
        stays fast; the linker (codes as the index knows them, loosely typed) loads on demand."""
        snap = self._current()
        asked = scope or Scope()
        question = Question.parse(text, snap.names)
        version = version or question.version or None  # `E07 on the CL57T V3` asks the V3 manual
        codes = look_up_codes(snap, question, scope, version, k, self.tuning)
        if codes.answer is not None and codes.elsewhere:
            return codes.answer  # another machine's entries, said so: no page of the asked machine prints the code
        if codes.answer is not None:
            return self._and_pages(question, codes.answer, codes.looked_up, scope, version, k)
        if codes.reported and (
            codes.listed_for_others
            or (question.printed and not question.mentioned and only_unknown_codes(snap, question))
            or codes_the_machine_lacks(snap, question, asked, self.tuning)
            or numbers_the_machine_skips(snap, question, asked, self.tuning)
        ):
            return codes.not_found(snap, scope, self.tuning)  # not a page sharing a word with how it was asked
        printed = bool(codes.reported) and codes_the_machine_prints(snap, question, asked, self.tuning)
        result = self.answer(self.candidates(question, scope), version, k, answerable=printed)
        if result.status == "ok" and not (asked.vendor or asked.model):
            result = self._at_the_named_machine(snap, question, result, version, k, printed)
        if codes.reported and not any(hit.manual_sha256 in question.mentioned for hit in result.hits):
            # The asked manual says nothing of the code by its words: where it is a scan, OCR may have misread it.
            scanned = on_scanned_pages(snap, question, asked, version, k, self.tuning)
            if scanned is not None and (question.mentioned or result.status == "not_found"):
                return scanned
        return codes.not_found(snap, scope, self.tuning) if result.status == "not_found" and codes.reported else result

    def _at_the_named_machine(
        self, snap: Snapshot, question: Question, found: SearchResult, version: str | None, k: int, answerable: bool
    ) -> SearchResult:
        """Where the question names one machine and nothing of its manuals came up (an English question on a German
        manual shares few words with it, and each ranking keeps few rows of a large library), the question asked at
        that machine, its manuals' own rows competing, and `not_found` if they do not answer: another machine's
        page is no answer about this one. Else what was `found`."""
        machines = {(m.vendor, m.model): m for m in (snap.machines[sha] for sha in question.mentioned)}
        if len(machines) != 1 or any(hit.manual_sha256 in question.mentioned for hit in found.hits):
            return found
        named = next(iter(machines.values()))
        if not (named.vendor or named.model):
            return found
        return self.answer(self.candidates(question, named), version, k, answerable=answerable)

    def _and_pages(
        self,
        question: Question,
        answered: SearchResult,
        codes: list[str],
        scope: Scope | None,
        version: str | None,
        k: int,
    ) -> SearchResult:
        """A code's entries, then what a search of the whole question finds besides them when it asks more
        than the code (`Err18 since the firmware update, which parameter?`): the page that says more, and
        the right page when the code was read into an entry of the wrong table. The manuals it names first."""
        if not set(question.besides_codes) - set(terms(" ".join(codes))):
            return answered
        shown = {(hit.manual_sha256, hit.page, hit.fault_code) for hit in answered.hits}
        # By words only: a code's answer stays quick, with no embedding model to load (`fixloop search E102 after
        # the update`). The code was found, so the question has an answer: the not-found floors, which weigh
        # whether it has one, do not apply (an English question about a Chinese note shares few of its words).
        found = self.answer(self.candidates(question, scope, mode="lexical"), version, k, answerable=True).hits
        found = [hit for hit in found if (hit.manual_sha256, hit.page, hit.fault_code) not in shown]
        ordered = sorted(
            [(hit, False) for hit in answered.hits]
            + [
                (hit, True)
                for hit in others_marked(prefer(found, question.mentioned, question.language), question.mentioned)
            ],
            key=lambda item: (item[0].manual_sha256 not in question.mentioned, item[1]),
        )
        answered.hits = [hit for hit, _ in ordered][:k]
        return answered

    def lookup(
        self, code: str, scope: Scope | None = None, version: str | None = None, language: str | None = None, k: int = 5
    ) -> SearchResult:
        """One code's entries, or `not_found` naming its near codes."""
        snap = self._current()
        scope = scope or Scope()
        found = look_up(snap, code, scope, version, language or "en", k, self.tuning)
        return found if found is not None else code_not_found(code, scope, near_codes(snap, code, scope, self.tuning))

    def search(
        self,
        text: str | Question,
        scope: Scope | None = None,
        version: str | None = None,
        k: int = 3,
        mode: Mode = "hybrid",
    ) -> SearchResult:
        """The question's words, its meaning (in the languages the model reads) and the other language's rows,
        fused (`candidates`, then `answer`)."""
        return self.answer(self.candidates(text, scope, mode), version, k)

    def candidates(self, text: str | Question, scope: Scope | None = None, mode: Mode = "hybrid") -> Candidates:
        """What the index holds for a question before any fitted constant is applied: the rankings and the
        evidence for an answer (`answer` weighs them)."""
        snap = self._current()
        question = text if isinstance(text, Question) else Question.parse(text, snap.names)
        readable = set(self.semantic_languages)
        if self.second_opinion is not None and mode == "hybrid":  # embedded beside the first stage
            weighed = opinion_weight(self.tuning, read=question.language in readable) > 0
            self.second_opinion.ask(snap, question.text, weighed)
        return gather(snap, question, scope or Scope(), mode, self.embedder, readable, self.tuning)

    def answer(
        self, found: Candidates, version: str | None = None, k: int = 3, answerable: bool = False
    ) -> SearchResult:
        """The hits for a question's candidates under this index's tuning, or `not_found`. `answerable`: the
        question is known to have an answer, so the evidence for one is not weighed."""
        question, snap = found.question, found.snapshot
        if not answerable and found.evidence.unanswered(self.tuning):
            return no_section(question.asked, found.scope)
        ranked = rank(found, self.tuning, self._opinion(found))
        hits = collapse(snap, ranked, found.scope, version, question.language, k, self.tuning, question.hit_words)
        if not hits:
            return version_not_found(question.text, [row for row, _, _ in ranked], version)
        return SearchResult(status="ok", hits=hits)

    def _opinion(self, found: Candidates) -> Opinion | None:
        """The second opinion on a search by words and meaning (a lexical one, such as the pages after a code's
        entries, stays quick), where it is on."""
        opinion = self.second_opinion
        if opinion is None or found.mode != "hybrid":
            return None
        return lambda rows: opinion.cosines(found.snapshot, found.question.text, rows)

    def codes(self) -> set[str]:
        """Every code in the index as printed; empty while there is no index."""
        try:
            return self._current().codes()
        except IndexMissing:
            return set()

    def safety(self, manual_sha256: str) -> list[SafetyStatement]:
        """The hazard statements a manual prints (knowledge.ingest.safety), in page order."""
        return self._current().statements(manual_sha256)

    @property
    def semantic_ready(self) -> bool:
        """Whether a question can be embedded now without loading a model first."""
        snap = self._store.opened
        return (snap is not None and snap.encoder_loaded) or self.embedder.loaded

    def warm(self) -> None:
        """Load now what the first free-text question would wait for: the question encoder (the
        ONNX export, else the model), the vectors, the code linker (spaCy), the Chinese word list
        (jieba), the glossary, and the maps of the rows by page and by vector (at 50,000 rows a
        first question spent 120 ms making those)."""
        snap = self._current()
        if snap.encoder() is None:
            self.embedder.load()
        snap.vectors()
        if self.second_opinion is not None:
            self.second_opinion.embedder.load()
        snap.linker()
        snap.entry_pages()
        snap.page_rows()
        terms("预热")
        expand("warm up")

    def close(self) -> None:
        """Close the open index file; a later call reopens it."""
        self._store.close()

    def _current(self) -> Snapshot:
        return self._store.current()
