"""The `fixloop` command. Each area adds its subcommands through `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Generator, Iterator

from edge.cli.errors import CliError, print_error
from edge.config import ConfigError, load_config
from edge.manual_index import IndexNotBuilt

# Modules under edge/cli/ that contribute subcommands, in help order.
AREAS = ["agent", "knowledge", "plc", "outbox", "work_orders", "service", "mcp", "runs", "doctor", "eval", "tokens"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fixloop",
        description="Edge maintenance agent for the shop floor.",
        formatter_class=_HiddenCommandsFormatter,
    )
    parser.add_argument("--config", help="TOML config file (default: $FIXLOOP_CONFIG, else the embedded demo plant)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in AREAS:
        importlib.import_module(f"edge.cli.{area}").register(subparsers)
    _name_commands(parser)
    return parser


def subcommands(
    parser: argparse.ArgumentParser, hidden: bool = False
) -> Iterator[tuple[argparse.ArgumentParser, str | None]]:
    """Every command under `parser`, depth first (`index`, then `index build`), with its one-line help.

    Hidden commands (help=argparse.SUPPRESS: old names kept as aliases, e.g. `plc-sim`) only with `hidden`."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if not isinstance(action, argparse._SubParsersAction):
            continue  # the group holding the subcommands also holds a command's positional arguments
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            if helps.get(name) == argparse.SUPPRESS and not hidden:
                continue
            yield subparser, helps.get(name)
            yield from subcommands(subparser, hidden)


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Give every command its full name, e.g. `fixloop index build`, for the error line `main` prints."""
    parser.set_defaults(command_name=parser.prog)
    for subparser, _ in subcommands(parser, hidden=True):
        subparser.set_defaults(command_name=subparser.prog)


class _HiddenCommandsFormatter(argparse.HelpFormatter):
    """Leaves commands registered with help=argparse.SUPPRESS out of the command list (Python 3.11 prints the marker)."""

    def _iter_indented_subactions(self, action: argparse.Action) -> Generator[argparse.Action, None, None]:
        for subaction in super()._iter_indented_subactions(action):
            if subaction.help != argparse.SUPPRESS:
                yield subaction


def main(argv: list[str] | None = None) -> int:
    # Models load from local paths only; this keeps any library from reaching for a hub at run time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"fixloop: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args, config) or 0)
    except CliError as exc:
        print_error(args.command_name, str(exc))
        return exc.exit_code
    except IndexNotBuilt as exc:  # a plant's config without its manual index: say how to build it
        print_error(args.command_name, str(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
