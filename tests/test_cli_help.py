"""Every `fixloop` command says what it does in `fixloop --help` and has a line in the README."""

import argparse
import re
from pathlib import Path

from edge.cli.main import build_parser, subcommands

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_command_and_subcommand_has_help_and_a_line_in_the_readme():
    commands = list(subcommands(build_parser()))

    assert len(commands) > 20
    assert [parser.prog for parser, help in commands if not help] == []
    # `fixloop plc` must not count as shown because `fixloop plc-sim` is.
    assert [parser.prog for parser, _ in commands if not re.search(re.escape(parser.prog) + r"(?![\w-])", README)] == []


def test_old_command_names_kept_as_aliases_are_hidden_from_the_help():
    parser = build_parser()
    shown = parser.format_help()
    hidden = [p.prog for p, help in subcommands(parser, hidden=True) if help == argparse.SUPPRESS]

    assert hidden == ["fixloop plc-sim", "fixloop plc-fault", "fixloop plc-read", "fixloop poller"]
    listed = [
        line.split()[0] for line in shown.splitlines() if line.startswith("    ") and not line.startswith("     ")
    ]
    assert "SUPPRESS" not in shown and "plc-" not in shown
    assert "plc" in listed and "poller" not in listed
    assert "fixloop plc sim" in README and "fixloop plc poll" in README
