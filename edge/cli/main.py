"""The `fixloop` command. Each area adds its subcommands through `register(subparsers)`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from edge.config import ConfigError, load_config
from edge.manual_index import IndexNotBuilt

# Modules under edge/cli/ that contribute subcommands, in help order.
AREAS = ["agent", "knowledge", "plc", "outbox", "service", "runs", "ops"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fixloop", description="Edge maintenance agent for the shop floor.")
    parser.add_argument("--config", help="TOML config file (default: $FIXLOOP_CONFIG, else the embedded demo plant)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for area in AREAS:
        importlib.import_module(f"edge.cli.{area}").register(subparsers)
    return parser


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
    except IndexNotBuilt as exc:  # a plant's config without its manual index: say how to build it
        print(f"fixloop {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
