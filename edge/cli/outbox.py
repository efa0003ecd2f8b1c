"""`fixloop outbox` and `fixloop work-orders`.

    fixloop outbox                         # pending and failed deliveries to the MES
    fixloop outbox retry                   # requeue every failed row (or: fixloop outbox retry 12 15)
    fixloop outbox deliver                 # the delivery worker (systemd: fixloop-outbox.service)
    fixloop outbox deliver --once          # one round, then print what happened
    fixloop work-orders list --status open
    fixloop work-orders show WO-3F9A1C2B7D4E5F60
    fixloop work-orders set-status WO-3F9A1C2B7D4E5F60 acknowledged
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
import time

from rich.console import Console
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.config import Config
from tools.work_orders.model import TRANSITIONS, OutboxRow, WorkOrder, WorkOrderError
from tools.work_orders.store import WorkOrderStore

STATUS_STYLE = {"open": "yellow", "acknowledged": "cyan", "in_progress": "blue", "done": "green",
                "cancelled": "dim", "pending": "yellow", "delivered": "green", "failed": "red"}


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

    orders = subparsers.add_parser("work-orders", help="work orders: list, show, set-status")
    orders.set_defaults(func=run_orders_list, status=None, device=None, limit=50, json=False)
    order_actions = orders.add_subparsers(dest="work_orders_command", metavar="ACTION")

    listing = order_actions.add_parser("list", help="newest first (the default)")
    listing.add_argument("--status", choices=list(TRANSITIONS))
    listing.add_argument("--device", help="device id, e.g. press-3")
    listing.add_argument("--limit", type=int, default=50)
    json_option(listing)
    listing.set_defaults(func=run_orders_list)

    show = order_actions.add_parser("show", help="one order with its evidence trace")
    show.add_argument("work_order_id")
    json_option(show)
    show.set_defaults(func=run_orders_show)

    set_status = order_actions.add_parser(
        "set-status", help="open → acknowledged → in_progress → done; cancel from any active status")
    set_status.add_argument("work_order_id")
    set_status.add_argument("status", choices=list(TRANSITIONS))
    set_status.add_argument("--actor", default="operator", choices=["technician", "operator", "mes", "agent"])
    set_status.set_defaults(func=run_orders_set_status)


def _store(config: Config) -> WorkOrderStore:
    from edge.agent import work_order_store

    return work_order_store(config)


# -- outbox ------------------------------------------------------------------


def run_outbox_list(args: argparse.Namespace, config: Config) -> int:
    statuses = ("pending", "failed", "delivered") if args.all else ("pending", "failed")
    rows = _store(config).outbox(statuses=statuses, limit=args.limit)
    if args.json:
        print(json.dumps([row.model_dump(exclude={"body"}) for row in rows], indent=2))
        return 0
    console = Console()
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
        table.add_row(str(row.row_id), row.work_order_id or "-", row.event_type.removeprefix("work_order."),
                      f"[{style}]{row.status}[/]",
                      str(row.attempts), due, result)
    return table


def _relative(seconds: float) -> str:
    if seconds <= 0:
        return "due now"
    if seconds < 120:
        return f"in {seconds:.0f} s"
    return f"in {seconds / 60:.0f} min"


def run_outbox_retry(args: argparse.Namespace, config: Config) -> int:
    try:
        count = _store(config).requeue(args.row_ids or None)
    except WorkOrderError as exc:
        raise CliError(str(exc)) from None
    Console().print(f"Requeued {count} row(s); `fixloop outbox deliver` posts them.")
    return 0


def run_outbox_deliver(args: argparse.Namespace, config: Config) -> int:
    import httpx

    from tools.work_orders.outbox import DeliveryStats, deliver_due, run_worker

    if not config.mes.url:
        raise CliError("set [mes] url (or FIXLOOP__MES__URL) to deliver work orders")
    console = Console(stderr=True)
    store = _store(config)
    if args.once:
        with httpx.Client() as client:
            stats = deliver_due(store, config.mes, client, time.time())
        console.print(f"attempted {stats.attempted}, delivered {stats.delivered}, "
                      f"retrying {stats.retrying}, failed {stats.failed}")
        return 0 if stats.failed == 0 else 1
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def report(stats: DeliveryStats) -> None:
        if stats.attempted:
            logging.getLogger("fixloop.outbox").info(
                "attempted %d, delivered %d, retrying %d, failed %d",
                stats.attempted, stats.delivered, stats.retrying, stats.failed)

    console.print(f"delivering to {config.mes.url} every {config.mes.poll_interval_s:g} s; Ctrl-C stops")
    run_worker(store, config.mes, stop, on_round=report)
    return 0


# -- work orders ---------------------------------------------------------------


def run_orders_list(args: argparse.Namespace, config: Config) -> int:
    orders = _store(config).list((args.status,) if args.status else (), device_id=args.device, limit=args.limit)
    if args.json:
        print(json.dumps([order.model_dump(mode="json") for order in orders], indent=2, ensure_ascii=False))
        return 0
    console = Console()
    if not orders:
        console.print("No work orders" + (f" with status {args.status}" if args.status else "") + ".")
        return 0
    table = Table(title="Work orders")
    table.add_column("id", min_width=19, no_wrap=True)
    for column in ("device", "fault", "prio", "status", "created"):
        table.add_column(column, no_wrap=True)
    table.add_column("summary", overflow="fold")
    for order in orders:
        style = STATUS_STYLE.get(order.status, "white")
        table.add_row(order.id, order.device_id, order.fault_code, order.priority, f"[{style}]{order.status}[/]",
                      order.created_at[5:16].replace("T", " "), order.summary)
    console.print(table)
    return 0


def run_orders_show(args: argparse.Namespace, config: Config) -> int:
    order = _store(config).get(args.work_order_id)
    if order is None:
        raise CliError(f"no work order {args.work_order_id!r}")
    if args.json:
        print(order.model_dump_json(indent=2))
        return 0
    _print_order(order, Console())
    return 0


def _print_order(order: WorkOrder, console: Console) -> None:
    style = STATUS_STYLE.get(order.status, "white")
    console.print(f"[bold]{order.id}[/]  [{style}]{order.status}[/]  {order.priority}")
    console.print(f"{order.title}\n{order.summary}")
    console.print(f"[dim]device {order.device_id} · fault {order.fault_code} · by {order.created_by} · "
                  f"run {order.source_run_id} · {order.occurrence} · created {order.created_at} · "
                  f"updated {order.updated_at}[/]")
    if order.alarm:
        console.print(f"MES alarm: {json.dumps(order.alarm, ensure_ascii=False)}")
    for number, evidence in enumerate(order.evidence, start=1):
        console.print(f"  evidence {number}: {json.dumps(evidence, ensure_ascii=False)}")


def run_orders_set_status(args: argparse.Namespace, config: Config) -> int:
    try:
        order = _store(config).set_status(args.work_order_id, args.status, actor=args.actor)
    except WorkOrderError as exc:
        raise CliError(str(exc)) from None
    Console().print(f"{order.id} is now [bold]{order.status}[/]; the MES is told through the outbox.")
    return 0
