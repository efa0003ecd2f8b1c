"""`fixloop tokens`: token and prefix-cache report of the real prompt over the regression cases."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.eval import progress, run_workdir, selected_cases
from edge.cli.options import case_options, json_option
from edge.cli.terminal import console as terminal
from edge.config import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    tokens = subparsers.add_parser(
        "tokens", help="token and prefix-cache report of the real prompt over the regression cases"
    )
    case_options(tokens)
    json_option(tokens, help="print the report as JSON")
    tokens.set_defaults(func=run_tokens)


def run_tokens(args: argparse.Namespace, config: Config) -> int:
    from edge.evaluation.cases import CaseFileError
    from edge.evaluation.tokens import measure_tokens

    try:
        cases = selected_cases(args, config)
    except CaseFileError as exc:
        raise CliError(str(exc)) from None
    err = terminal(stderr=True)
    with run_workdir(args.workdir) as workdir, progress(err, len(cases), "tokens") as tick:
        _, report = measure_tokens(config, cases, workdir, on_case=tick)
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print_token_report(terminal(), report)
    return 0


def print_token_report(console: Console, report) -> None:
    typical = [task for task in report.tasks if len(task.steps) == 3][:5] or report.tasks[:5]
    table = Table(title="prompt tokens per step (typical 3-step tasks)")
    for column in ("case", "step", "prompt", "stable prefix", "share", "reply", "context"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for task in typical:
        for step in task.steps:
            table.add_row(
                task.case_id if step is task.steps[0] else "",
                str(step.n),
                str(step.prompt_tokens),
                str(step.shared_prefix_tokens),
                "-" if step is task.steps[0] else f"{step.prefix_share:.1%}",
                str(step.completion_tokens),
                str(task.context_tokens) if step is task.steps[-1] else "",
            )
    console.print(table)

    def verdict(ok: bool) -> str:
        return "[green]met[/]" if ok else "[bold red]missed[/]"

    share_min = "-" if report.prefix_share_from_step2_min is None else f"{report.prefix_share_from_step2_min:.1%}"
    share_mean = "-" if report.prefix_share_from_step2_mean is None else f"{report.prefix_share_from_step2_mean:.1%}"
    console.print(f"source: {report.source}; {len(report.tasks)} tasks")
    console.print(f"[yellow]{report.note}[/]" if report.estimated else report.note)
    console.print(
        f"prompt at step 1: max {report.step1_prompt_max} tokens "
        f"(target ≤ {report.step1_target:,}: {verdict(report.step1_target_met)})"
    )
    console.print(f"stable prefix from step 2 on (what a prefix cache reuses): min {share_min}, mean {share_mean}")
    console.print(
        f"context per typical 3-step task ({report.typical_tasks} tasks): p50 {report.typical_context_p50}, "
        f"max {report.typical_context_max} (target ≤ {report.context_target:,}: {verdict(report.context_target_met)}); "
        f"max over all tasks {report.context_max}"
    )
    console.print(
        f"tokens processed per task without a prefix cache: mean {report.processed_mean}; "
        f"with it (uncached prompt + replies): mean {report.uncached_mean}"
    )
