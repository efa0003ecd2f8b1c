"""`fixloop runs list | show | codes | feedback [confirm | withdraw]`: the stored run records, queried from the shell.

fixloop runs list --reason max_steps          # runs that hit the step budget
fixloop runs list --device press-3 --since 2h
fixloop runs show run-3f2a9c0d1e2b
fixloop runs codes                            # fault codes that cost the most steps
fixloop runs feedback --no-helpful --since 7d  # answers technicians said did not help
fixloop runs feedback confirm run-3f2a9c0d1e2b --reporter "Li Wei" --by "Chen Jing"  # vouch for a reported fix
fixloop runs feedback withdraw run-3f2a9c0d1e2b --by "Li Wei"  # the reporter takes their fix back
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, get_args

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.config import Config
from edge.run import Feedback, FeedbackFilter, RunFilter, RunStore, TerminationReason
from edge.run.feedback import confirm, withdraw
from tools.work_orders.model import WorkOrderError

if TYPE_CHECKING:
    from tools.work_orders.store import WorkOrderStore

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def register(subparsers: argparse._SubParsersAction) -> None:
    runs = subparsers.add_parser("runs", help="query stored run records (traces, termination reasons, steps)")
    commands = runs.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)

    listing = commands.add_parser("list", help="recent runs, newest first, with filters")
    listing.add_argument("--reason", choices=get_args(TerminationReason), help="termination reason, e.g. max_steps")
    listing.add_argument("--device", help="device id, e.g. press-3")
    listing.add_argument("--session", help="session id")
    listing.add_argument("--actor", choices=["technician", "mes", "operator", "agent"])
    listing.add_argument("--code", help="fault code the run dealt with, e.g. E102")
    listing.add_argument("--min-steps", type=int, help="at least this many steps (e.g. 6: past the warning line)")
    listing.add_argument(
        "--degraded",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only runs answered (--degraded) or not answered (--no-degraded) by the rules planner",
    )
    listing.add_argument("--since", type=duration, help="only runs started this long ago or later, e.g. 30m, 2h, 7d")
    listing.add_argument("--limit", type=int, default=30)
    json_option(listing, help="one JSON object per line")
    listing.set_defaults(func=run_list)

    show = commands.add_parser("show", help="one run's whole trace")
    show.add_argument("run_id")
    json_option(show, help="the whole run record as JSON")
    show.set_defaults(func=run_show)

    codes = commands.add_parser("codes", help="fault codes ranked by the steps their runs took")
    codes.add_argument("--since", type=duration, help="only runs started this long ago or later, e.g. 7d")
    codes.add_argument("--limit", type=int, default=20)
    json_option(codes, help="one JSON object per line")
    codes.set_defaults(func=run_codes)

    feedback = commands.add_parser("feedback", help="technicians' feedback on answers, newest first")
    feedback.add_argument("--device", help="device id, e.g. press-3")
    feedback.add_argument(
        "--helpful",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only answers marked helpful (--helpful) or not (--no-helpful)",
    )
    feedback.add_argument("--since", type=duration, help="only feedback given this long ago or later, e.g. 7d")
    feedback.add_argument("--limit", type=int, default=30)
    json_option(feedback, help="one JSON object per line")
    feedback.set_defaults(func=run_feedback)
    # Run on the box by whoever holds its state files: the operator vouches as a supervisor does on the tablet.
    reports = feedback.add_subparsers(dest="feedback_command", metavar="SUBCOMMAND")
    confirm = reports.add_parser(
        "confirm", help="confirm a fix a technician reported: it becomes a recorded fix, no longer unverified"
    )
    confirm.add_argument("run_id", help="the run the fix was reported on, e.g. run-3f2a9c0d1e2b")
    confirm.add_argument("--reporter", required=True, help="who reported it (as `fixloop runs feedback` lists)")
    confirm.add_argument("--by", required=True, help="who confirms it: a name or badge number")
    confirm.set_defaults(func=run_feedback_confirm)
    withdraw = reports.add_parser("withdraw", help="take back a fix reported on an answer (its reporter's word)")
    withdraw.add_argument("run_id", help="the run the fix was reported on")
    withdraw.add_argument("--by", required=True, help="who reported it")
    withdraw.set_defaults(func=run_feedback_withdraw)


def duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 2h or 7d")
    return float(match.group(1)) * _SECONDS[match.group(2)]


def _store(config: Config) -> RunStore:
    return RunStore(config.state_path(config.service.run_store_file))


def _since_ms(seconds: float | None) -> int | None:
    return None if seconds is None else int((time.time() - seconds) * 1000)


def run_list(args: argparse.Namespace, config: Config) -> int:
    try:
        where = RunFilter(
            reason=args.reason,
            device_id=args.device,
            session_id=args.session,
            actor=args.actor,
            fault_code=args.code,
            min_steps=args.min_steps,
            degraded=args.degraded,
            since_ms=_since_ms(args.since),
            limit=args.limit,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    rows = _store(config).list(where)
    if args.json:
        for row in rows:
            print(row.model_dump_json())
        return 0
    table = Table(title=f"{len(rows)} run(s)", show_lines=False)
    for column in ("started", "run", "device", "actor", "steps", "stop", "ms", "codes", "work order", "question"):
        # Ids must stay copyable; the question may wrap.
        table.add_column(column, no_wrap=column != "question", overflow="fold")
    for row in rows:
        stop_style = "green" if row.reason == "final_answer" else "red"
        table.add_row(
            _when(row.started_ms),
            row.run_id,
            escape(row.device_id or "-"),
            row.actor,
            f"[bold red]{row.steps}[/]" if row.steps > 5 else str(row.steps),
            f"[{stop_style}]{row.reason}[/]" + (" [yellow](degraded)[/]" if row.degraded else ""),
            f"{row.elapsed_ms:.0f}",
            escape(",".join(row.fault_codes) or "-"),
            f"{row.work_order_id or '-'} {row.work_order_status or ''}".strip(),
            escape(row.question),
        )
    terminal().print(table)
    return 0


def run_show(args: argparse.Namespace, config: Config) -> int:
    from edge.cli.agent import print_trace

    store = _store(config)
    record = store.get(args.run_id)
    if record is None:
        raise CliError(f"no run {args.run_id!r} in {store.path}", exit_code=1)
    confirmations = store.confirmations(args.run_id)
    if args.json:
        print(
            json.dumps(
                {"record": record.model_dump(mode="json"), "confirmations": [c.model_dump() for c in confirmations]},
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    console = terminal()
    console.print(
        f"[bold]{escape(record.question)}[/]  [dim]{_when(record.started_ms)} · {record.actor} · "
        f"device {escape(record.device_id or '-')} · session {escape(record.session_id or '-')} · "
        f"tokens {record.prompt_tokens}+{record.completion_tokens}[/]"
    )
    print_trace(record, console)
    for step in record.steps:
        console.print(
            f"[dim]step {step.n}: planner {step.planner_ms:.0f} ms, tool {step.tool_ms:.0f} ms, "
            f"total {step.step_ms:.0f} ms[/]"
        )
    if record.termination and record.termination.pending_action:
        console.print(
            "[yellow]pending action at takeover:[/] "
            + escape(json.dumps(record.termination.pending_action, ensure_ascii=False))
        )
    for confirmation in confirmations:
        console.print(
            f"[green]confirmed[/] {confirmation.work_order_id} ({confirmation.work_order_status}, "
            f"{'created' if confirmation.created else 'already open'}) at {_when(confirmation.confirmed_ms)}"
        )
    return 0


def run_codes(args: argparse.Namespace, config: Config) -> int:
    rows = _store(config).codes_by_steps(limit=args.limit, since_ms=_since_ms(args.since))
    if args.json:
        for row in rows:
            print(row.model_dump_json())
        return 0
    table = Table(title="fault codes by steps per run (over 5 steps: the prompt or a tool needs work)")
    for column in ("code", "runs", "mean steps", "max steps", "runs > 5 steps", "not answered"):
        table.add_column(column, justify="left" if column == "code" else "right")
    for row in rows:
        table.add_row(
            escape(row.fault_code),
            str(row.runs),
            f"{row.mean_steps:.1f}",
            str(row.max_steps),
            f"[red]{row.over_five}[/]" if row.over_five else "0",
            str(row.not_answered),
        )
    terminal().print(table)
    return 0


def run_feedback(args: argparse.Namespace, config: Config) -> int:
    try:
        where = FeedbackFilter(
            device_id=args.device, helpful=args.helpful, since_ms=_since_ms(args.since), limit=args.limit
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    rows = _store(config).feedback(where)
    if args.json:
        for row in rows:
            print(row.model_dump_json())
        return 0
    table = Table(title=f"{len(rows)} feedback")
    for column in ("given", "run", "device", "codes", "by", "helpful", "what fixed it", "question"):
        table.add_column(column, no_wrap=column in ("given", "run"), overflow="fold")
    for row in rows:
        table.add_row(
            _when(row.given_ms),
            row.run_id,
            row.device_id or "-",
            escape(",".join(row.fault_codes) or "-"),
            escape(row.actor),
            "[green]yes[/]" if row.helpful else "[red]no[/]",
            _fix_cell(row),
            escape(row.question),
        )
    terminal().print(table)
    return 0


def _fix_cell(row: Feedback) -> Text:
    """The fix with how far it is to be trusted: a report stays unverified until someone confirms it."""
    if row.fix is None:
        return Text("-")
    if row.confirmed_by:
        trust = Text(f"confirmed by {row.confirmed_by}", style="green")
    else:
        trust = Text("unverified report", style="yellow")
    return Text.assemble(row.fix, "\n", trust, f" · {row.report_id}" if row.report_id else "")


def run_feedback_confirm(args: argparse.Namespace, config: Config) -> int:
    return _report_change(config, lambda runs, orders: confirm(runs, orders, args.run_id, args.reporter, args.by))


def run_feedback_withdraw(args: argparse.Namespace, config: Config) -> int:
    return _report_change(config, lambda runs, orders: withdraw(runs, orders, args.run_id, args.by))


def _report_change(config: Config, change: Callable[[RunStore, WorkOrderStore], Feedback]) -> int:
    from edge.cli.work_orders import order_store

    try:
        given = change(_store(config), order_store(config))
    except WorkOrderError as exc:
        raise CliError(str(exc)) from None
    trust = f"confirmed by {given.confirmed_by}" if given.confirmed_by else "unverified report"
    what = f"{given.fix} ({trust})" if given.fix else "no fix (withdrawn)"
    terminal().print(
        Text(f"{given.run_id} · {given.actor}: {what}" + (f" · {given.report_id}" if given.report_id else ""))
    )
    return 0


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
