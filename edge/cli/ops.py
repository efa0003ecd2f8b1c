"""`fixloop doctor`, `fixloop eval` and `fixloop tokens`: is the box ready, and does the agent still answer well."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.config import Config

STATUS_STYLE = {"ok": "green", "notice": "cyan", "warning": "yellow", "failure": "bold red"}
MARK = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[dim]·[/]"}


def register(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser("doctor", help="check config, manual index, PLCs and the LLM server; say what to fix")
    json_option(doctor, help="print the checks as JSON")
    doctor.set_defaults(func=run_doctor)

    evaluate = subparsers.add_parser(
        "eval", help="run regression cases through the agent against the demo plant and score them")
    evaluate.add_argument("cases", help="JSON Lines case file, e.g. tests/eval/cases.jsonl")
    json_option(evaluate, help="print every case's run records and scores, and the summary, as JSON")
    evaluate.add_argument("--only", help="comma-separated case ids to run")
    evaluate.add_argument("--quiet", action="store_true", help="print only failing cases and the summary")
    evaluate.add_argument("--baseline", help="baseline JSON: exit 1 if any summary score falls below it")
    evaluate.add_argument("--write-baseline", help="record this run's scores as the baseline in this file")
    evaluate.add_argument("--workdir", help="where the run's PLC cache and work orders go (default: a temporary directory)")
    evaluate.set_defaults(func=run_eval)

    tokens = subparsers.add_parser(
        "tokens", help="token and prefix-cache report of the real prompt over the regression cases")
    tokens.add_argument("cases", help="JSON Lines case file, e.g. tests/eval/cases.jsonl")
    json_option(tokens, help="print the report as JSON")
    tokens.add_argument("--only", help="comma-separated case ids to run")
    tokens.add_argument("--workdir", help="where the run's PLC cache and work orders go (default: a temporary directory)")
    tokens.set_defaults(func=run_tokens)


# -- doctor ------------------------------------------------------------------


def run_doctor(args: argparse.Namespace, config: Config) -> int:
    from edge.doctor import as_json, failed, run_checks

    checks = run_checks(config, config.source)
    if args.json:
        print(as_json(checks))
        return 1 if failed(checks) else 0
    console = Console()
    table = Table(title="fixloop doctor", show_lines=True)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail")
    table.add_column("how to fix")
    for check in checks:
        table.add_row(check.name, f"[{STATUS_STYLE[check.status]}]{check.status}[/]", escape(check.detail), escape(check.fix))
    console.print(table)
    counts = {status: sum(c.status == status for c in checks) for status in STATUS_STYLE}
    verdict = "[bold red]not ready[/]" if failed(checks) else "[green]ready[/]"
    console.print(f"{verdict}: {counts['failure']} failure(s), {counts['warning']} warning(s), {counts['notice']} notice(s)")
    return 1 if failed(checks) else 0


# -- eval --------------------------------------------------------------------


def run_eval(args: argparse.Namespace, config: Config) -> int:
    from edge.evaluation.cases import CaseFileError
    from edge.evaluation.runner import evaluate
    from edge.evaluation.summary import baseline_of, load_baseline, regressions

    try:
        cases = _cases(args, config)
        baseline = load_baseline(args.baseline) if args.baseline else None
    except (CaseFileError, ValueError) as exc:
        raise CliError(str(exc)) from None
    err = Console(stderr=True)
    console = Console()
    show = None if args.json else (lambda report: _print_case(console, report, args.quiet))
    with _workdir(args.workdir) as workdir, _progress(err, len(cases), "eval") as tick:
        report = evaluate(config, cases, workdir, on_case=_both(show, tick))
    found = regressions(report.summary, baseline) if baseline else []
    if args.write_baseline:
        scores = {case.case.id: case.score for case in report.cases}
        Path(args.write_baseline).write_text(baseline_of(report.summary, scores).model_dump_json(indent=2) + "\n",
                                             encoding="utf-8")
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
    console.print(f"[bold]{report.case.question}[/]" + (f"  [dim](device {report.case.device_id})[/]" if report.case.device_id else ""),
                  highlight=False)
    for earlier in report.session_runs:
        console.print(f"[dim]earlier in the session: {earlier.question} → stop {earlier.termination.reason if earlier.termination else '-'}[/]")
    if report.case.fault:
        fault = report.case.fault
        console.print(f"[yellow]fault injected:[/] {fault.kind} on {fault.device_id}" + (f"/{fault.sensor}" if fault.sensor else ""))
    if report.record is not None:
        print_trace(report.record, console)
    marks = " ".join(f"{name} {MARK[getattr(score, name)]}" for name in
                     ("first_tool", "tool_set", "fault_code", "sensor", "manual", "work_order", "grounded", "termination", "language"))
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
        f"p95 {summary.latency_p95_ms:.0f} ms, max {summary.latency_max_ms:.0f} ms · {report.elapsed_s:.1f} s")
    console.print(f"[dim]index {report.index}{' (demo index built for this run)' if report.index_built else ''}"
                  + (f" · LLM {report.model} at {report.llm_url}" if report.llm_url else " · rules planner (no LLM URL)") + "[/]")
    if summary.failed:
        console.print(f"[red]failed:[/] {', '.join(summary.failed)}")


# -- tokens ------------------------------------------------------------------


def run_tokens(args: argparse.Namespace, config: Config) -> int:
    from edge.evaluation.cases import CaseFileError
    from edge.evaluation.tokens import measure_tokens

    try:
        cases = _cases(args, config)
    except CaseFileError as exc:
        raise CliError(str(exc)) from None
    err = Console(stderr=True)
    with _workdir(args.workdir) as workdir, _progress(err, len(cases), "tokens") as tick:
        _, report = measure_tokens(config, cases, workdir, on_case=tick)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print_token_report(Console(), report)
    return 0


def print_token_report(console: Console, report) -> None:
    typical = [task for task in report.tasks if len(task.steps) == 3][:5] or report.tasks[:5]
    table = Table(title="prompt tokens per step (typical 3-step tasks)")
    for column in ("case", "step", "prompt", "stable prefix", "share", "reply", "context"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for task in typical:
        for step in task.steps:
            table.add_row(task.case_id if step is task.steps[0] else "", str(step.n), str(step.prompt_tokens),
                          str(step.shared_prefix_tokens), "-" if step is task.steps[0] else f"{step.prefix_share:.1%}",
                          str(step.completion_tokens), str(task.context_tokens) if step is task.steps[-1] else "")
    console.print(table)

    def verdict(ok: bool) -> str:
        return "[green]met[/]" if ok else "[bold red]missed[/]"

    share_min = "-" if report.prefix_share_from_step2_min is None else f"{report.prefix_share_from_step2_min:.1%}"
    share_mean = "-" if report.prefix_share_from_step2_mean is None else f"{report.prefix_share_from_step2_mean:.1%}"
    console.print(f"source: {report.source}; {len(report.tasks)} tasks")
    console.print(f"[yellow]{report.note}[/]" if report.estimated else report.note)
    console.print(f"stable prefix from step 2 on: min {share_min}, mean {share_mean} "
                  f"(target ≥ {report.prefix_target:.0%}: {verdict(report.prefix_target_met)})")
    console.print(f"context per typical 3-step task ({report.typical_tasks} tasks): p50 {report.typical_context_p50}, "
                  f"max {report.typical_context_max} (target ≤ {report.context_target:,}: {verdict(report.context_target_met)}); "
                  f"max over all tasks {report.context_max}")
    console.print(f"tokens processed per task without a prefix cache: mean {report.processed_mean}; "
                  f"with it (uncached prompt + replies): mean {report.uncached_mean}")


# -- shared ------------------------------------------------------------------


def _cases(args: argparse.Namespace, config: Config):
    from edge.evaluation.cases import CaseFileError, load_cases

    cases = load_cases(args.cases, config.devices)
    if args.only:
        wanted = [case_id.strip() for case_id in args.only.split(",") if case_id.strip()]
        unknown = sorted(set(wanted) - {case.id for case in cases})
        if unknown:
            raise CaseFileError(f"--only names unknown case(s): {', '.join(unknown)}")
        cases = [case for case in cases if case.id in wanted]
    return cases


class _workdir:
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


class _progress:
    def __init__(self, console: Console, total: int, label: str):
        self._bar = Progress(TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=console, transient=True, disable=not console.is_terminal)
        self._task = self._bar.add_task(label, total=total)

    def __enter__(self):
        self._bar.start()
        return lambda report: self._bar.advance(self._task)

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()


def _both(first, second):
    def call(report) -> None:
        if first is not None:
            first(report)
        second(report)
    return call

