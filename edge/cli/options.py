"""Options several commands share, spelt once so they read and behave the same everywhere."""

from __future__ import annotations

import argparse


def json_option(parser: argparse.ArgumentParser, help: str = "print JSON instead of the readable view") -> None:
    parser.add_argument("--json", action="store_true", help=help)
