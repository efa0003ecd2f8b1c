"""`fixloop eval`: run the regression cases through the agent against the demo plant and score them.

The case selection (`--only`), the run's working directory and the progress bar are shared with `fixloop tokens`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import case_options, json_option
from edge.cli.terminal import console as terminal
from edge.config import Config

MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[dim]·[/]"}


def register(subparsers: argparse._SubParsersAction) -> None:
    evaluate = subparsers.add_parser(
        "eval", help="run regression cases through the agent against the demo plant and score them"
    )
    case_options(evaluate)
    json_option(evaluate, help="print every case's run records and scores, and the summary, as JSON")
    evaluate.add_argument("--quiet", action="store_true", help="print only failing cases and the summary")
    evaluate.add_argument("--baseline", help="baseline JSON: exit 1 if any summary score falls below it")
    evaluate.add_argument("--write-baseline", help="record this run's scores as the baseline in this file")
    evaluate.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace, config: Config) -> int:
    from edge.evaluation.cases import CaseFileError
    from edge.evaluation.runner import evaluate
    from edge.evaluation.summary import baseline_of, load_baseline, regressions

    try:
        cases = selected_cases(args, config)
        baseline = load_baseline(args.baseline) if args.baseline else None
    except (CaseFileError, ValueError) as exc:
        raise CliError(str(exc)) from None
    err = terminal(stderr=True)
    console = terminal()
    show = None if args.json else (lambda report: _print_case(console, report, args.quiet))
    with run_workdir(args.workdir) as workdir, progress(err, len(cases), "eval") as tick:
        report = evaluate(config, cases, workdir, on_case=_both(show, tick))
    found = regressions(report.summary, baseline) if baseline else []
    if args.write_baseline:
        scores = {case.case.id: case.score for case in report.cases}
        Path(args.write_baseline).write_text(
            baseline_of(report.summary, scores).model_dump_json(indent=2) + "\n", encoding="utf-8"
        )
    if args.json:
        payload = report.model_dump(mode="json")
        payload["regressions"] = found
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_summary(console, report)
        if baseline:
            if found:
                console.print("[bold red]below the baseline:[/]")
                for line in found:
                    console.print(f"  - {line}")
            else:
                console.print(f"[green]at or above the baseline[/] ({args.baseline})")
    return 1 if found else 0


def _print_case(console: Console, report, quiet: bool) -> None:
    from edge.cli.agent import print_trace

    score = report.score
    if quiet and score.passed:
        return
    verdict = "[green]PASS[/]" if score.passed else "[bold red]FAIL[/]"
    console.rule(f"{verdict} {report.case.id}")
    console.print(
        f"[bold]{report.case.question}[/]"
        + (f"  [dim](device {report.case.device_id})[/]" if report.case.device_id else ""),
        highlight=False,
    )
    for earlier in report.session_runs:
        console.print(
            f"[dim]earlier in the session: {earlier.question} → stop {earlier.termination.reason if earlier.termination else '-'}[/]"
        )
    if report.case.fault:
        fault = report.case.fault
        console.print(
            f"[yellow]fault injected:[/] {fault.kind} on {fault.device_id}"
            + (f"/{fault.sensor}" if fault.sensor else "")
        )
    if report.record is not None:
        print_trace(report.record, console)
    from edge.evaluation.scoring import METRICS

    marks = " ".join(f"{name} {MARK[getattr(score, name)]}" for name in METRICS if name != "passed")
    console.print(f"{marks}  [dim]{score.steps} steps · {score.tokens} tokens · {score.latency_ms:.0f} ms[/]")
    for problem in score.problems:
        console.print(f"  [red]•[/] {problem}", highlight=False)


def print_summary(console: Console, report) -> None:
    summary = report.summary
    table = Table(title=f"fixloop eval: {summary.cases} cases, planner {', '.join(summary.planners)}")
    table.add_column("metric")
    table.add_column("passed", justify="right")
    table.add_column("rate", justify="right")
    for name, metric in summary.metrics.items():
        rate = "-" if metric.rate is None else f"{metric.rate:.1%}"
        style = "bold" if name == "passed" else ""
        table.add_row(f"[{style}]{name}[/]" if style else name, f"{metric.passed}/{metric.applicable}", rate)
    console.print(table)
    console.print(
        f"steps mean {summary.steps_mean} (max {summary.steps_max}) · tokens mean {summary.tokens_mean} "
        f"(max {summary.tokens_max}, context max {summary.context_tokens_max}) · latency p50 {summary.latency_p50_ms:.0f} ms, "
        f"p95 {summary.latency_p95_ms:.0f} ms, max {summary.latency_max_ms:.0f} ms · {report.elapsed_s:.1f} s"
    )
    console.print(
        f"[dim]index {report.index}{' (demo index built for this run)' if report.index_built else ''}"
        + (f" · LLM {report.model} at {report.llm_url}" if report.llm_url else " · rules planner (no LLM URL)")
        + "[/]"
    )
    if summary.failed:
        console.print(f"[red]failed:[/] {', '.join(summary.failed)}")


def _both(first, second):
    def call(report) -> None:
        if first is not None:
            first(report)
        second(report)

    return call


# -- shared with `fixloop tokens` --------------------------------------------


def selected_cases(args: argparse.Namespace, config: Config):
    from edge.evaluation.cases import CaseFileError, load_cases

    cases = load_cases(args.cases, config.devices)
    if args.only:
        wanted = [case_id.strip() for case_id in args.only.split(",") if case_id.strip()]
        unknown = sorted(set(wanted) - {case.id for case in cases})
        if unknown:
            raise CaseFileError(f"--only names unknown case(s): {', '.join(unknown)}")
        cases = [case for case in cases if case.id in wanted]
    return cases


class run_workdir:
    """The run's own directory: the one given, else a temporary one removed afterwards."""

    def __init__(self, path: str | None):
        self._path = path
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Path:
        if self._path:
            return Path(self._path)
        self._tmp = tempfile.TemporaryDirectory(prefix="fixloop-eval-")
        return Path(self._tmp.name)

    def __exit__(self, *exc: object) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


class progress:
    def __init__(self, console: Console, total: int, label: str):
        self._bar = Progress(
            TextColumn(f"[bold]{label}[/]"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self._task = self._bar.add_task(label, total=total)

    def __enter__(self):
        self._bar.start()
        return lambda report: self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()
