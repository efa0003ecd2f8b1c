"""`fixloop index build`, `fixloop index status` and `fixloop search`.

fixloop index build var/manuals/                 # PDFs or folders; incremental, atomic swap
fixloop index status
fixloop search E102 --device press-3
fixloop search "the motor is hot" --device press-3 --k 3
fixloop search --batch queries.txt --json        # one query a line, one JSON result list a line
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.config import Config
from edge.manual_index import ensure_index
from knowledge.models import Scope, SearchResult
from knowledge.search import IndexMissing, ManualIndex
from tools import plant

if TYPE_CHECKING:  # the build side loads PyMuPDF and sqlite-utils: not for a cold `fixloop search E102`
    from knowledge.ingest.build import BuildEvent, BuildReport

_STATUS_STYLE = {"indexed": "green", "reused": "cyan", "failed": "red", "duplicate": "yellow"}


def register(subparsers: argparse._SubParsersAction) -> None:
    index = subparsers.add_parser("index", help="build or inspect the manual index (offline re-indexing)")
    actions = index.add_subparsers(dest="index_command", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="index PDF manuals (files or folders); unchanged PDFs are reused")
    build.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    build.add_argument("--db", type=Path, help="index file (default: [knowledge] index_file in the state directory)")
    build.add_argument(
        "--embedding-model",
        dest="embedding_model",
        metavar="DIR",
        help="sentence-transformers model directory (default: [knowledge] model_path)",
    )
    # What the operator knows better than the cover page; a `<file>.pdf.toml` beside a PDF says it per manual.
    build.add_argument("--vendor", help="vendor of every manual given (over the title pages and any sidecar file)")
    build.add_argument(
        "--model",
        dest="machine_model",
        metavar="MODEL",
        help="machine model or series, e.g. HP-200 (over the title pages and any sidecar file)",
    )
    build.add_argument("--version", help="manual version, e.g. V2.1")
    build.add_argument("--device", help="device id from the config these manuals belong to, e.g. press-3")
    build.add_argument(
        "--no-ocr",
        dest="ocr",
        action="store_false",
        help="leave scanned pages unread (a quick rebuild; they are reported as without text)",
    )
    build.set_defaults(func=run_index_build)
    status = actions.add_parser("status", help="what the live index holds")
    status.add_argument("--db", type=Path)
    json_option(status)
    status.set_defaults(func=run_index_status)

    search = subparsers.add_parser("search", help="search the manuals by fault code or symptom")
    search.add_argument("query", nargs="?", help='a fault code (E102) or a symptom ("the motor is hot")')
    search.add_argument("--device", help="device id from the config, e.g. press-3")
    search.add_argument("--version", help="manual version, e.g. V1.2 (default: the newest)")
    search.add_argument("--k", type=int, default=3, help="results to show (default 3)")
    json_option(search, help="machine-readable output")
    search.add_argument("--db", type=Path)
    search.add_argument(
        "--batch", type=Path, help="file with one query a line (text, or JSON with query/device/version)"
    )
    search.set_defaults(func=run_search)


def _db(args: argparse.Namespace, config: Config) -> Path:
    return args.db or config.state_path(config.knowledge.index_file)


def run_index_build(args: argparse.Namespace, config: Config) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from knowledge.ingest.build import BuildError, build_index

    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise CliError(f"no such file or folder: {', '.join(missing)}")
    console = terminal(stderr=True)
    with Progress(
        TextColumn("{task.description:<11}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[file]}"),
        console=console,
        transient=False,
    ) as progress:
        tasks = {
            stage: progress.add_task(stage, total=None, file="")
            for stage in ("manuals", "pages", "records", "embeddings")
        }

        def on_event(event: BuildEvent) -> None:
            task = tasks[event.stage]
            if event.total is not None:
                progress.update(task, total=event.total)
            progress.update(task, advance=event.advance, file=escape(event.file))

        try:
            report = build_index(
                args.paths,
                _db(args, config),
                model_path=args.embedding_model or config.knowledge.model_path,
                progress=on_event,
                overrides=_overrides(args, config),
                ocr=args.ocr,
                second_opinion=config.knowledge.second_opinion,
            )
        except (BuildError, plant.UnknownDevice) as exc:
            raise CliError(f"{exc}; the live index is unchanged") from None
        for stage in ("pages", "records"):
            progress.update(tasks[stage], total=progress.tasks[tasks[stage]].completed)
    _print_build(terminal(), report)
    return 1 if report.failed else 0


def _overrides(args: argparse.Namespace, config: Config) -> dict[str, str | None]:
    if args.device is not None:
        plant.require(config.devices, args.device)
    return {"vendor": args.vendor, "model": args.machine_model, "version": args.version, "device": args.device}


def _print_build(console: Console, report: BuildReport) -> None:
    table = Table(title="Manuals", title_justify="left")
    numbers = ("pages", "text", "OCR", "empty", "fault sections", "entries", "safety")
    for column in ("file", "status", "vendor", "model", "version", "lang", *numbers, "note"):
        table.add_column(column, justify="right" if column in numbers else "left")
    for m in report.manuals:
        note = m.error or "; ".join(
            (["no fault entries found: searched as pages only"] if m.status == "indexed" and not m.records else [])
            + ([f"no text on p. {', '.join(map(str, m.scanned_pages))}"] if m.scanned_pages else [])
            + ([f"{m.duplicates} duplicate entries merged"] if m.duplicates else [])
            + m.warnings
        )
        style = "yellow" if m.status == "indexed" and not m.records else _STATUS_STYLE[m.status]
        table.add_row(
            escape(m.file),
            f"[{style}]{m.status}[/]",
            escape(m.vendor),
            escape(m.model),
            m.version,
            m.language,
            str(m.pages),
            str(m.text_pages),
            str(len(m.ocr_pages)),
            str(len(m.scanned_pages)),
            str(m.fault_sections),
            str(m.records),
            str(m.safety),
            escape(note),
        )
    console.print(table)
    counts = {s: sum(m.status == s for m in report.manuals) for s in _STATUS_STYLE}
    rate = report.pages / report.elapsed_s if report.elapsed_s else 0.0
    console.print(
        f"[bold]{len(report.manuals)}[/] manuals ({counts['indexed']} indexed, {counts['reused']} unchanged, "
        f"{counts['failed']} failed, {counts['duplicate']} duplicate files) · [bold]{report.pages}[/] pages "
        f"({report.ocr_pages} read by OCR in {report.ocr_s:.1f} s"
        + (
            f", {report.outline_pages} of them had only outlines or an unusable text layer"
            if report.outline_pages
            else ""
        )
        + f", {report.scanned_pages} without text) · "
        f"[bold]{report.records}[/] fault entries · {report.safety} safety statements · "
        f"{report.embedded} texts embedded · {report.duplicates} duplicates · "
        f"{report.elapsed_s:.1f} s ({rate:.0f} pages/s)"
    )
    for warning in report.warnings:
        console.print(f"[yellow]{escape(warning)}[/]")
    pages_only = [m.file for m in report.manuals if m.status == "indexed" and not m.records]
    if pages_only:
        console.print(f"[yellow]No fault entries found, searched as pages only:[/] {escape(', '.join(pages_only))}")
    scanned = [f"{m.file} p. {', '.join(map(str, m.scanned_pages))}" for m in report.manuals if m.scanned_pages]
    if scanned:
        console.print(f"[yellow]Pages without text (OCR could not read them):[/] {escape('; '.join(scanned))}")
    for m in report.failed:
        console.print(f"[red]not indexed:[/] {escape(m.error)}")
    console.print(f"index: {escape(report.index)}")


def run_index_status(args: argparse.Namespace, config: Config) -> int:
    from knowledge.ingest.build import BuildError, read_status

    try:
        status = read_status(_db(args, config))
    except BuildError as exc:
        raise CliError(str(exc), exit_code=1) from None
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    console = terminal()
    table = Table(
        title=f"{status.index} · built {status.built_at} · {status.size_bytes / 1e6:.1f} MB · model {status.model}",
        title_justify="left",
    )
    for column in (
        "file",
        "vendor",
        "model",
        "version",
        "device",
        "lang",
        "pages",
        "OCR pages",
        "no text",
        "entries",
        "passages",
        "on disk",
    ):
        table.add_column(column)
    for m in status.manuals:
        style = {"unchanged": "green", "changed": "yellow", "missing": "red"}[m.on_disk]
        table.add_row(
            escape(m.file),
            escape(m.vendor),
            escape(m.model),
            m.version,
            escape(m.device) or "-",
            m.language,
            str(m.pages),
            ", ".join(map(str, m.ocr_pages)) or "-",
            ", ".join(map(str, m.scanned_pages)) or "-",
            str(m.records),
            str(m.passages),
            f"[{style}]{m.on_disk}[/]",
        )
    console.print(table)
    console.print(
        f"{len(status.manuals)} manuals · {sum(m.records for m in status.manuals)} fault entries · "
        f"{sum(m.passages for m in status.manuals)} page passages"
    )
    if any(m.on_disk != "unchanged" for m in status.manuals):
        console.print("[yellow]Some manuals changed since indexing: run `fixloop index build` again.[/]")
    return 0


def run_search(args: argparse.Namespace, config: Config) -> int:
    if (args.query is None) == (args.batch is None):
        raise CliError("give a QUERY or --batch FILE (not both)")
    if args.k < 1:
        raise CliError("--k must be at least 1")
    if args.db is None:
        ensure_index(config)  # the demo plant's index is built on first use; a plant's own config says how
    index = ManualIndex(
        _db(args, config),
        model_path=config.knowledge.model_path,
        semantic_languages=tuple(config.knowledge.semantic_languages),
        second_opinion=config.knowledge.second_opinion,
    )
    try:
        if args.batch is not None:
            return _batch(index, args, config)
        scope = _scope(args.device, config)
        result = index.query(args.query, scope, args.version, k=args.k)
    except (IndexMissing, plant.UnknownDevice, OSError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        _print_result(terminal(), result)
    return 0 if result.status == "ok" else 1


def _scope(device_id: str | None, config: Config) -> Scope | None:
    return None if device_id is None else plant.scope(plant.require(config.devices, device_id))


def _batch(index: ManualIndex, args: argparse.Namespace, config: Config) -> int:
    lines = args.batch.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        spec = {"query": line.strip()}
        if line.lstrip().startswith("{"):
            try:
                spec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise OSError(f"{args.batch}:{number}: not valid JSON ({exc.msg})") from None
        result = index.query(
            spec["query"], _scope(spec.get("device", args.device), config), spec.get("version", args.version), k=args.k
        )
        if args.json:
            print(json.dumps([hit.model_dump() for hit in result.hits], ensure_ascii=False), flush=True)
        else:
            terminal().rule(escape(spec["query"]))
            _print_result(terminal(), result)
        if result.status != "ok":
            terminal(stderr=True).print(f"line {number}: {escape(result.message)}")
    return 0


def _print_result(console: Console, result: SearchResult) -> None:
    if result.status != "ok":
        console.print(f"[yellow]not found:[/] {escape(result.message)}")
        if result.suggestion:
            console.print(f"[dim]{escape(result.suggestion)}[/]")
        return
    if result.message:
        console.print(f"[yellow]{escape(result.message)}[/]")
    for hit in result.hits:
        applies = {True: " [green]applies to this device[/]", False: " [red]other machine[/]", None: ""}[
            hit.applies_to_device
        ]
        if hit.kind == "page":
            ocr = " · [yellow]OCR text, check the page[/]" if hit.ocr else ""
            console.print(
                f"[bold]{escape(hit.manual)} p. {hit.page}[/] · {escape(hit.title)} · {escape(hit.scope)}{applies}"
            )
            console.print(f"  [dim]page match · {hit.match} · score {hit.score:.2f}{ocr}[/]")
            console.print(f"  {escape(hit.snippet)}")
            continue
        console.print(
            f"[bold cyan]{escape(hit.fault_code)}[/] [bold]{escape(hit.title)}[/] · {escape(hit.scope)}{applies}"
        )
        console.print(
            f"  [dim]{escape(hit.manual)} p. {hit.page} · {hit.version} · {hit.match} · score {hit.score:.2f}[/]"
        )
        console.print(f"  [dim]{escape(hit.version_compatibility)}[/]")
        if hit.cause:
            console.print(f"  cause: {escape(hit.cause)}")
        for n, step in enumerate(hit.steps, 1):
            console.print(f"  {n}. {escape(step)}")
    if result.suggestion:
        console.print(f"[dim]{escape(result.suggestion)}[/]")
