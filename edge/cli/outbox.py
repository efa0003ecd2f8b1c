"""`fixloop outbox`: deliveries of work orders to the MES.

fixloop outbox                         # pending and failed deliveries to the MES
fixloop outbox retry                   # requeue every failed row (or: fixloop outbox retry 12 15)
fixloop outbox deliver                 # the delivery worker (systemd: fixloop-outbox.service)
fixloop outbox deliver --once          # one round, then print what happened
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time

from rich.markup import escape
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.cli.work_orders import order_store
from edge.config import Config
from tools.work_orders.model import OutboxRow, WorkOrderError

STATUS_STYLE = {"pending": "yellow", "delivered": "green", "failed": "red"}


def register(subparsers: argparse._SubParsersAction) -> None:
    outbox = subparsers.add_parser("outbox", help="deliveries of work orders to the MES: list, retry, deliver")
    outbox.set_defaults(func=run_outbox_list, all=False, limit=100, json=False)
    actions = outbox.add_subparsers(dest="outbox_command", metavar="ACTION")

    listing = actions.add_parser("list", help="pending and failed deliveries (the default)")
    listing.add_argument("--all", action="store_true", help="include delivered rows")
    listing.add_argument("--limit", type=int, default=100)
    json_option(listing)
    listing.set_defaults(func=run_outbox_list)

    retry = actions.add_parser("retry", help="requeue failed deliveries now (all failed rows when no id is given)")
    retry.add_argument("row_ids", nargs="*", type=int, metavar="ROW_ID")
    retry.set_defaults(func=run_outbox_retry)

    deliver = actions.add_parser("deliver", help="post due rows to [mes] url until stopped (SIGTERM/Ctrl-C)")
    deliver.add_argument("--once", action="store_true", help="one round, then exit")
    deliver.set_defaults(func=run_outbox_deliver)


def run_outbox_list(args: argparse.Namespace, config: Config) -> int:
    statuses = ("pending", "failed", "delivered") if args.all else ("pending", "failed")
    rows = order_store(config).outbox(statuses=statuses, limit=args.limit)
    if args.json:
        print(json.dumps([row.model_dump(exclude={"body"}) for row in rows], indent=2))
        return 0
    console = terminal()
    target = config.mes.url or "[yellow]no \\[mes] url set: rows wait here[/]"
    if not rows:
        console.print(f"Outbox empty: nothing waiting for the MES ({target}).")
        return 0
    console.print(_outbox_table(rows, time.time()))
    console.print(f"MES: {target}.  Requeue failed rows: [bold]fixloop outbox retry[/]")
    return 0


def _outbox_table(rows: list[OutboxRow], now: float) -> Table:
    table = Table(title="MES outbox")
    table.add_column("row", justify="right")
    table.add_column("work order", min_width=19, no_wrap=True)
    for column in ("event", "status", "tries", "next"):
        table.add_column(column, no_wrap=True)
    table.add_column("last result", overflow="fold")
    for row in rows:
        style = STATUS_STYLE.get(row.status, "white")
        due = "" if row.status != "pending" else _relative(row.next_attempt_at - now)
        result = row.last_error or (str(row.last_status_code) if row.last_status_code else "")
        table.add_row(
            str(row.row_id),
            row.work_order_id or "-",
            row.event_type.removeprefix("work_order."),
            f"[{style}]{row.status}[/]",
            str(row.attempts),
            due,
            escape(result),  # the MES's own words: text, not markup
        )
    return table


def _relative(seconds: float) -> str:
    if seconds <= 0:
        return "due now"
    if seconds < 120:
        return f"in {seconds:.0f} s"
    return f"in {seconds / 60:.0f} min"


def run_outbox_retry(args: argparse.Namespace, config: Config) -> int:
    try:
        count = order_store(config).requeue(args.row_ids or None)
    except WorkOrderError as exc:
        raise CliError(str(exc)) from None
    terminal().print(f"Requeued {count} row(s); `fixloop outbox deliver` posts them.")
    return 0


def run_outbox_deliver(args: argparse.Namespace, config: Config) -> int:
    import httpx

    from tools.work_orders.outbox import DeliveryStats, deliver_due, run_worker

    if not config.mes.url:
        raise CliError("set [mes] url (or FIXLOOP__MES__URL) to deliver work orders")
    console = terminal(stderr=True)
    store = order_store(config)
    if args.once:
        with httpx.Client() as client:
            stats = deliver_due(store, config.mes, client, time.time())
        console.print(
            f"attempted {stats.attempted}, delivered {stats.delivered}, "
            f"retrying {stats.retrying}, failed {stats.failed}"
        )
        return 0 if stats.failed == 0 else 1
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def report(stats: DeliveryStats) -> None:
        if stats.attempted:
            logging.getLogger("fixloop.outbox").info(
                "attempted %d, delivered %d, retrying %d, failed %d",
                stats.attempted,
                stats.delivered,
                stats.retrying,
                stats.failed,
            )

    console.print(f"delivering to {config.mes.url} every {config.mes.poll_interval_s:g} s; Ctrl-C stops")
    run_worker(store, config.mes, stop, on_round=report)
    return 0
