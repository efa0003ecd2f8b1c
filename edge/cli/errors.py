"""`CliError`: how a command fails. `main` prints it once, as the red `fixloop <command>: <message>` line."""

from __future__ import annotations

from rich.markup import escape

from edge.cli.terminal import console as terminal


class CliError(Exception):
    """A failure worded for the operator; the command name is added by `main`, so handlers never spell it."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def print_error(command: str, message: str) -> None:
    # soft_wrap: one line however long the path in it, so logs and `2>&1 | grep` keep it whole.
    terminal(stderr=True).print(f"[red]{escape(command)}:[/] {escape(message)}", soft_wrap=True)
