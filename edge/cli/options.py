"""Options several commands share, spelt once so they read and behave the same everywhere."""

from __future__ import annotations

import argparse


def json_option(parser: argparse.ArgumentParser, help: str = "print JSON instead of the readable view") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def case_options(parser: argparse.ArgumentParser) -> None:
    """The regression cases a command runs (`eval`, `tokens`) and where their runs keep state."""
    parser.add_argument("cases", help="JSON Lines case file, e.g. tests/eval/cases.jsonl")
    parser.add_argument("--only", help="comma-separated case ids to run")
    parser.add_argument(
        "--workdir", help="where the run's PLC cache and work orders go (default: a temporary directory)"
    )
