"""Manual search: quality and speed, against a BM25-only baseline measured in the same run.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_search.py [--corpus ../shared/corpus]

1. Renders the demo manuals and, from the third-party fault-code corpus
   (read at run time, never copied into the repo), one PDF manual per source
   file; indexes them all with a loaded model and reports pages/s: their text
   pages alone first (OCR off, as bench_manuals.py), then every page.
2. Pads the index past --min-records with copies of the corpus records under
   other vendor names, so search runs against a realistic number of records.
3. Runs the labelled queries (tests/data/search_queries.jsonl) through the
   hybrid search (exact code first, then BM25 + SBERT fusion) and through
   BM25 alone, and prints recall@1/@3 per query kind and latency p50/p95
   (the query embedding included).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_support import build_stages, build_start_up  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from edge.config import load_config  # noqa: E402
from knowledge.codes import code_key, scope_key  # noqa: E402
from knowledge.demo import write_demo_manuals  # noqa: E402
from knowledge.demo.render import FaultEntry, ManualDoc, render_pdf  # noqa: E402
from knowledge.ingest.build import build_index  # noqa: E402
from knowledge.models import Scope  # noqa: E402
from knowledge.search import ManualIndex  # noqa: E402

console = Console()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=ROOT / ".." / "shared" / "corpus",
        help="third-party fault-code corpus with normalized/entries.jsonl (default: ../shared/corpus)",
    )
    parser.add_argument("--queries", type=Path, default=ROOT / "tests" / "data" / "search_queries.jsonl")
    parser.add_argument("--min-records", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5, help="latency: passes over the query set")
    args = parser.parse_args()
    entries_file = args.corpus / "normalized" / "entries.jsonl"
    if not entries_file.exists():
        console.print(f"[red]corpus not found: {entries_file} (pass --corpus)[/red]")
        return 2
    queries = [json.loads(line) for line in args.queries.read_text(encoding="utf-8").splitlines() if line.strip()]
    devices = load_config(env={}).devices

    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        work = Path(tmp)
        corpus_pdfs = render_corpus(entries_file, work / "corpus")
        demo_pdfs = write_demo_manuals(work / "demo")

        embedder, load_s = build_start_up()

        # Text pages alone first (OCR off): a few scanned pages' OCR would outweigh every text page.
        text_only = build_index(demo_pdfs + corpus_pdfs, work / "text-only.sqlite", embedder=embedder, ocr=False)
        db = work / "manuals.sqlite"
        report = build_index(demo_pdfs + corpus_pdfs, db, embedder=embedder)
        records_before = report.records
        total = pad(db, args.min_records)

        index = ManualIndex(db, embedder=embedder)
        index.warm()
        scopes = {device_id: Scope(vendor=d.vendor, model=d.model, label=device_id) for device_id, d in devices.items()}
        quality = evaluate(index, queries, scopes)
        latency = measure(index, queries, scopes, args.rounds)

    failed = [m for m in report.manuals if m.status == "failed"]
    console.print(
        f"[dim]machine: {os.cpu_count()} cores, load average at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f} "
        "(other processes compete for the same cores)[/]"
    )
    console.print(
        f"[bold]Indexing[/] {len(report.manuals)} manuals ({len(demo_pdfs)} demo, {len(corpus_pdfs)} from the corpus), "
        f"{report.pages} pages, {records_before} records in {report.elapsed_s:.1f} s: "
        f"[bold]{report.pages / report.elapsed_s:.1f} pages/s[/] "
        f"({records_before / report.elapsed_s:.0f} records/s; model load and ONNX export {load_s:.1f} s not included; "
        f"{report.ocr_pages} pages read by OCR in {report.ocr_s:.1f} s; "
        f"{report.scanned_pages} scanned pages reported; {len(failed)} failed)"
    )
    console.print(f"  stages: {build_stages(report)}", highlight=False)
    text_pages = sum(m.text_pages for m in text_only.manuals)
    console.print(
        f"[bold]Text build[/] (OCR off): {text_pages} text pages in {text_only.elapsed_s:.1f} s: "
        f"[bold]{text_pages / text_only.elapsed_s:.1f} pages/s[/]",
        highlight=False,
    )
    console.print(f"  stages: {build_stages(text_only)}", highlight=False)
    console.print(f"[bold]Search index[/] {total} records after padding with corpus copies under other vendor names")
    print_quality(quality)
    print_latency(latency)
    return 0


# -- corpus to PDF ----------------------------------------------------------


def render_corpus(entries_file: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True)
    by_file: dict[str, list[dict]] = defaultdict(list)
    for line in entries_file.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("code"):
            by_file[entry["file"]].append(entry)
    paths = []
    for file, entries in sorted(by_file.items()):
        source = entries[0]["source"]
        faults = [_fault(e) for e in entries]
        stem = re.sub(r"[^A-Za-z0-9]+", "-", Path(file).stem).strip("-")
        manual = ManualDoc(
            title=f"{source} {stem} fault reference",
            vendor=source.title(),
            model=stem.upper(),
            version="V1.0",
            language="en",
            valid_for=f"{source} {stem}",
            header=f"{source} · {stem} · fault reference · V1.0",
            footer_note=f"{source} documentation (third-party corpus)",
            heading="Error {code}: {title}",
            intro=f"Fault codes of {source}, rendered from the corpus for benchmarking.",
            table_faults=faults[::2],
            text_faults=faults[1::2],
        )
        path = out / f"{source}_{stem}.pdf"
        render_pdf(manual, path)
        paths.append(path)
    return paths


def _fault(entry: dict) -> FaultEntry:
    def clean(value) -> str:
        return "" if value in (None, "None") else re.sub(r"\s+", " ", str(value)).strip()

    text, remedy = clean(entry.get("text")), clean(entry.get("remedy"))
    steps = [s for s in re.split(r"(?<=[.!?])\s+", remedy or text) if s] or ["See the vendor documentation."]
    title = clean(entry.get("title")) or (text.split(".")[0][:80] if text else entry["code"])
    return FaultEntry(
        code=entry["code"], title=title, symptom=text if remedy else "", cause=clean(entry.get("cause")), steps=steps
    )


def pad(db: Path, min_records: int) -> int:
    """Copies of the corpus records under other vendor names until the index holds min_records."""
    conn = sqlite3.connect(db)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(records)") if row[1] != "id"]
    demo_vendors = ("HYDRA", "MERIDIAN")
    count = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    copy = 0
    while count < min_records:
        copy += 1
        select = ", ".join(
            f"vendor || ' copy {copy}'" if c == "vendor" else f"vendor_key || 'COPY{copy}'" if c == "vendor_key" else c
            for c in columns
        )
        conn.execute(
            f"INSERT INTO records ({', '.join(columns)}) SELECT {select} FROM records "
            f"WHERE vendor_key NOT IN {demo_vendors} AND vendor_key NOT LIKE '%COPY%'"
        )
        count = conn.execute("SELECT count(*) FROM records").fetchone()[0]
    conn.execute("INSERT INTO records_fts(records_fts) VALUES('rebuild')")
    conn.commit()
    conn.close()
    return count


# -- quality ----------------------------------------------------------------


def relevant(hit, query: dict, scope: Scope | None) -> bool:
    if code_key(hit.fault_code) != code_key(query["expect"]):
        return False
    return scope is None or (scope_key(hit.vendor), scope_key(hit.model)) == (
        scope_key(scope.vendor),
        scope_key(scope.model),
    )


def evaluate(index: ManualIndex, queries: list[dict], scopes: dict[str, Scope]) -> dict:
    systems = {
        "hybrid (exact → BM25+SBERT)": lambda q, s: index.query(q, s, k=3),
        "BM25 only (baseline)": lambda q, s: index.search(q, s, k=3, mode="lexical"),
        "SBERT only": lambda q, s: index.search(q, s, k=3, mode="semantic"),
    }
    results: dict = {}
    for name, run in systems.items():
        tally: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
        misses = []
        for query in queries:
            scope = scopes.get(query.get("device")) if query.get("device") else None
            hits = run(query["query"], scope).hits
            at1 = bool(hits) and relevant(hits[0], query, scope)
            at3 = any(relevant(h, query, scope) for h in hits[:3])
            tally[query["kind"]].append((at1, at3))
            tally[f"{query['kind']} ({query['lang']})"].append((at1, at3))
            if not at3:
                misses.append(f"{query['query']} → {[h.fault_code for h in hits]} (want {query['expect']})")
        results[name] = (tally, misses)
    return results


def print_quality(results: dict) -> None:
    kinds = sorted(next(iter(results.values()))[0])
    table = Table(
        title="Recall on the labelled query set (device-scoped, index padded past the record target)",
        title_justify="left",
    )
    table.add_column("queries")
    for name in results:
        table.add_column(f"{name}\nR@1 / R@3", justify="right")
    for kind in kinds:
        row = [f"{kind} (n={len(next(iter(results.values()))[0][kind])})"]
        for tally, _ in results.values():
            hits = tally[kind]
            row.append(f"{sum(a for a, _ in hits) / len(hits):.0%} / {sum(b for _, b in hits) / len(hits):.0%}")
        table.add_row(*row)
    console.print(table)
    for name, (_, misses) in results.items():
        if misses:
            console.print(
                f"[dim]{name} misses@3 ({len(misses)}): "
                + "; ".join(misses[:8])
                + (" …" if len(misses) > 8 else "")
                + "[/]"
            )


# -- latency ----------------------------------------------------------------


def measure(index: ManualIndex, queries: list[dict], scopes: dict[str, Scope], rounds: int) -> dict[str, list[float]]:
    """Each question asked at its machine (hybrid and BM25 alone in turn, as every earlier figure was taken),
    then, in passes of their own, with no machine as `fixloop search` and the MCP tool ask: a question over
    every row evicts the machine's rows from the caches, which would slow the figures beside it."""
    timings: dict[str, list[float]] = defaultdict(list)
    asked = [
        [
            ("hybrid", partial(index.query, query["query"], scopes.get(query.get("device")), k=3)),
            ("BM25 only", partial(index.search, query["query"], scopes.get(query.get("device")), k=3, mode="lexical")),
        ]
        for query in queries
    ]
    unscoped = [[("hybrid, no machine", partial(index.query, query["query"], None, k=3))] for query in queries]
    for runs in (asked, unscoped):
        for _ in range(rounds):
            for query, systems in zip(queries, runs, strict=True):
                for name, run in systems:
                    started = time.perf_counter()
                    run()
                    timings[f"{name} · {query['kind']}"].append((time.perf_counter() - started) * 1000)
    return timings


def print_latency(timings: dict[str, list[float]]) -> None:
    table = Table(
        title="Search latency per query (ms, query embedding included; asked at the query's machine unless said)",
        title_justify="left",
    )
    for column in ("system · queries", "n", "p50", "p95", "max"):
        table.add_column(column, justify="left" if column.startswith("system") else "right")
    for name, values in sorted(timings.items()):
        values = sorted(values)
        table.add_row(
            name,
            str(len(values)),
            f"{statistics.median(values):.2f}",
            f"{values[int(0.95 * (len(values) - 1))]:.2f}",
            f"{values[-1]:.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
