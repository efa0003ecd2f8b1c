"""`fixloop doctor`: is the box ready, and what to fix. The checks live in `edge.doctor`; this prints them."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.config import Config

_STATUS_STYLE = {"ok": "green", "notice": "cyan", "warning": "yellow", "failure": "bold red"}


def register(subparsers: argparse._SubParsersAction) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check config, manual index, PLCs and the LLM server; say what to fix"
    )
    json_option(doctor, help="print the checks as JSON")
    doctor.set_defaults(func=run_doctor)


def run_doctor(args: argparse.Namespace, config: Config) -> int:
    from edge.doctor import as_json, failed, run_checks

    checks = run_checks(config, config.source)
    if args.json:
        print(as_json(checks))
        return 1 if failed(checks) else 0
    console = terminal()
    table = Table(title="fixloop doctor", show_lines=True)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail")
    table.add_column("how to fix")
    for check in checks:
        table.add_row(
            check.name, f"[{_STATUS_STYLE[check.status]}]{check.status}[/]", escape(check.detail), escape(check.fix)
        )
    console.print(table)
    counts = {status: sum(c.status == status for c in checks) for status in _STATUS_STYLE}
    verdict = "[bold red]not ready[/]" if failed(checks) else "[green]ready[/]"
    console.print(
        f"{verdict}: {counts['failure']} failure(s), {counts['warning']} warning(s), {counts['notice']} notice(s)"
    )
    return 1 if failed(checks) else 0
