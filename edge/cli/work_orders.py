"""`fixloop work-orders`: the work orders the agent and the MES created, and their status.

    fixloop work-orders list --status open
    fixloop work-orders show WO-3F9A1C2B7D4E5F60
    fixloop work-orders set-status WO-3F9A1C2B7D4E5F60 acknowledged
    fixloop work-orders set-status WO-3F9A1C2B7D4E5F60 in_progress --isolation-confirmed --by "J. Weber"
    fixloop work-orders set-status WO-3F9A1C2B7D4E5F60 done --cause "coolant filter clogged" \
        --remedy "replaced the filter" --part FLT-200=1 --note "filter was 2 months overdue"
    fixloop work-orders isolation-rule on --by "J. Weber"    # every move to in_progress needs isolation confirmed
    fixloop work-orders isolation-rule off --by "J. Weber"
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from edge.cli.errors import CliError
from edge.cli.options import json_option
from edge.cli.terminal import console as terminal
from edge.config import Config
from tools.text_fields import person_name
from tools.work_orders.model import CLOSED_STATUSES, ISOLATING_STATUS, TRANSITIONS, Fix, WorkOrder, WorkOrderError
from tools.work_orders.store import WorkOrderStore

if TYPE_CHECKING:
    from edge.service.isolation import Reader, SensorRead
    from edge.service.schemas import StatusChange

STATUS_STYLE = {"open": "yellow", "acknowledged": "cyan", "in_progress": "blue", "done": "green", "cancelled": "dim"}


def register(subparsers: argparse._SubParsersAction) -> None:
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
        "set-status", help="open → acknowledged → in_progress → done; cancel from any active status"
    )
    set_status.add_argument("work_order_id")
    set_status.add_argument("status", choices=list(TRANSITIONS))
    set_status.add_argument("--actor", default="operator", choices=["technician", "operator", "mes", "agent"])
    closing = f"when closing ({' or '.join(CLOSED_STATUSES)})"
    set_status.add_argument("--cause", help=f"what was found, {closing}")
    set_status.add_argument("--remedy", help=f"what was done, {closing}")
    set_status.add_argument(
        "--part",
        action="append",
        default=[],
        metavar="PART[=QTY]",
        help=f"a part used, with its quantity after '=' (repeat for each), {closing}; e.g. --part 6205-2RS=2",
    )
    set_status.add_argument("--note", help=f"free text, {closing}")
    set_status.add_argument(
        "--isolation-confirmed",
        action="store_true",
        help="with in_progress: the device is isolated (locked out); refused while its zero-energy signal reads "
        "energised or cannot be read",
    )
    set_status.add_argument("--by", help="who confirmed the isolation (a name or badge number)")
    set_status.set_defaults(func=run_orders_set_status)

    rule = order_actions.add_parser(
        "isolation-rule",
        help="the plant's rule that every move to in_progress confirms the device isolated: show, on, off",
    )
    rule.add_argument("switch", nargs="?", choices=["show", "on", "off"], default="show")
    rule.add_argument("--by", help="who turns it on or off (a name or badge number)")
    rule.set_defaults(func=run_isolation_rule)


def order_store(config: Config) -> WorkOrderStore:
    """The plant's work-order store (imported late: the agent's imports are not cheap)."""
    from edge.agent import work_order_store

    return work_order_store(config)


def run_orders_list(args: argparse.Namespace, config: Config) -> int:
    orders = order_store(config).list((args.status,) if args.status else (), device_id=args.device, limit=args.limit)
    if args.json:
        print(json.dumps([order.model_dump(mode="json") for order in orders], indent=2, ensure_ascii=False))
        return 0
    console = terminal()
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
        table.add_row(
            escape(order.id),
            escape(order.device_id),
            escape(order.fault_code),
            order.priority,
            f"[{style}]{order.status}[/]",
            order.created_at[5:16].replace("T", " "),
            escape(order.summary),
        )
    console.print(table)
    return 0


def run_orders_show(args: argparse.Namespace, config: Config) -> int:
    order = order_store(config).get(args.work_order_id)
    if order is None:
        raise CliError(f"no work order {args.work_order_id!r}")
    if args.json:
        print(order.model_dump_json(indent=2))
        return 0
    _print_order(order, terminal())
    return 0


def _print_order(order: WorkOrder, console: Console) -> None:
    style = STATUS_STYLE.get(order.status, "white")
    console.print(f"[bold]{escape(order.id)}[/]  [{style}]{order.status}[/]  {order.priority}")
    console.print(f"{order.title}\n{order.summary}", markup=False, highlight=False)
    console.print(
        escape(
            f"device {order.device_id} · fault {order.fault_code} · by {order.created_by} · "
            f"run {order.source_run_id} · {order.occurrence} · created {order.created_at} · "
            f"updated {order.updated_at}"
        ),
        style="dim",
    )
    if order.alarm:
        console.print(f"MES alarm: {json.dumps(order.alarm, ensure_ascii=False)}", markup=False)
    if order.isolation_confirmed_at:
        reading = order.isolation_reading
        seen = f" ({reading.label} {reading.value:g} {reading.unit}, {reading.quality})" if reading else ""
        console.print(
            f"isolation confirmed {order.isolation_confirmed_at} by {order.isolation_confirmed_by}{seen}",
            markup=False,
            highlight=False,
        )
    for tick in order.checklist:
        read = f" — {tick.reading.value} {tick.reading.unit} ({tick.reading.quality})" if tick.reading else ""
        mark = "x" if tick.done else " "
        console.print(
            f"  [{mark}] {tick.step_key} {tick.text}{read} · {tick.by} {tick.at}", markup=False, highlight=False
        )
    if order.closed_at:
        console.print(f"closed {order.closed_at} by {order.closed_by}", markup=False, highlight=False)
    parts = ", ".join(part.label() for part in order.parts)
    for label, value in (("cause", order.cause), ("remedy", order.remedy), ("parts", parts), ("note", order.note)):
        if value:
            console.print(f"  {label}: {value}", markup=False, highlight=False)
    for number, evidence in enumerate(order.evidence, start=1):
        console.print(f"  evidence {number}: {json.dumps(evidence, ensure_ascii=False)}", markup=False)


def run_orders_set_status(args: argparse.Namespace, config: Config) -> int:
    from edge.service.isolation import IsolationGate  # the service's imports: only for a move

    change = _change(args)
    with _plc_reads(config) as read:
        gate = IsolationGate(order_store(config), config.devices, read)
        try:
            order = gate.move(args.work_order_id, change, args.actor)
        except WorkOrderError as exc:
            raise CliError(str(exc)) from None
    console = terminal()
    console.print(f"{escape(order.id)} is now [bold]{order.status}[/]; the MES is told through the outbox.")
    if order.status == ISOLATING_STATUS and order.isolation_confirmed_by:
        reading = order.isolation_reading
        seen = f": {reading.label} {reading.value:g} {reading.unit} ({reading.quality})" if reading else ""
        console.print(f"isolation confirmed by {order.isolation_confirmed_by}{seen}", markup=False, highlight=False)
    return 0


def run_isolation_rule(args: argparse.Namespace, config: Config) -> int:
    """Show or switch the rule kept in the plant's store. A config requiring isolation records it whenever
    it opens the store, so turning it off while this config says `require_isolation = true` is refused."""
    store = order_store(config)
    if args.switch == "on":
        store.require_isolation(_switched_by(args))
    elif args.switch == "off":
        if config.work_orders.require_isolation:
            raise CliError(
                f"[work_orders] require_isolation = true in {config.source} turns the rule on again whenever "
                "it is loaded: set it to false there (and in every config sharing this store) first"
            )
        by = _switched_by(args)
        if store.release_isolation() is not None:
            terminal().print(f"isolation rule turned off by {by}", markup=False, highlight=False)
    rule = store.isolation_rule()
    if rule is None:
        print("isolation rule: off; an order may enter in_progress without its isolation confirmed")
    else:
        terminal().print(
            f"isolation rule: on since {rule.set_at} ({rule.set_by}); an order enters in_progress only with "
            "--isolation-confirmed --by NAME (the tablet, the MES and the CLI alike)",
            markup=False,
            highlight=False,
        )
    return 0


def _switched_by(args: argparse.Namespace) -> str:
    if args.by is None:
        raise CliError(f"--by: who turns the isolation rule {args.switch} (a name or badge number)")
    try:
        return person_name(args.by)
    except ValueError as exc:
        raise CliError(f"--by: {exc}") from None


@contextmanager
def _plc_reads(config: Config) -> Iterator[Reader]:
    """Reads through the agent's PLC tool, opened on the first read (most moves read nothing)."""
    from edge.service.isolation import read_sensor
    from tools.plc.tool import PlcReadTool
    from tools.registry import ToolRegistry

    opened: list[ToolRegistry] = []

    def read(device_id: str, sensor: str) -> SensorRead:
        if not opened:
            opened.append(
                ToolRegistry([PlcReadTool(config.devices, config.plc, config.state_path(config.plc.cache_file))])
            )
        return read_sensor(opened[0], device_id, sensor, "operator")

    try:
        yield read
    finally:
        for registry in opened:
            registry.close()


def _change(args: argparse.Namespace) -> StatusChange:
    """The move as the API's contract, each error named by the option it came from."""
    from edge.service.schemas import StatusChange

    fix = _fix(args)
    try:
        return StatusChange.model_validate(
            {
                "status": args.status,
                **fix.model_dump(),
                "isolation_confirmed": True if args.isolation_confirmed else None,
                "by": args.by,
            }
        )
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        if error["loc"]:
            option = f"--{error['loc'][0]}"
        else:
            option = "--isolation-confirmed" if "isolation" in error["msg"] else f"--{args.status}"
        raise CliError(f"{option}: {error['msg'].removeprefix('Value error, ')}") from None


def _fix(args: argparse.Namespace) -> Fix:
    """The fix options as the store's contract, each error named by the option it came from."""
    parts = [_part(text) for text in args.part]
    try:
        return Fix.model_validate({"cause": args.cause, "remedy": args.remedy, "parts": parts, "note": args.note})
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = error["loc"]
        option = f"--part {args.part[where[1]]!r}" if where[0] == "parts" and len(where) > 1 else f"--{where[0]}"
        raise CliError(f"{option}: {error['msg']}") from None


def _part(text: str) -> dict[str, object]:
    name, sep, quantity = text.rpartition("=")
    if not sep:
        return {"part": text}
    try:
        number = float(quantity)
    except ValueError:
        raise CliError(f"--part {text!r}: the quantity after '=' must be a number, e.g. --part 6205-2RS=2") from None
    return {"part": name, "quantity": int(number) if number.is_integer() else number}
