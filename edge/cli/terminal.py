"""The console every command prints through: text from a manual, a run record or a work order is shown on the
terminal, never obeyed by it.

Stored text can hold what a terminal acts on: an escape sequence recolours or clears the screen, rewrites
the window title or hides the lines before it, a carriage return overwrites its own line, a bidirectional
control reorders what follows. Rich passes the escape character through, whatever `markup` says, so the
console shows each such character as a visible stand-in: a control picture (␛ for ESC) for C0 and DEL,
`<U+XXXX>` for C1 and bidirectional controls. Strings are replaced before Rich lays them out (so a table's
columns are measured with the stand-ins), and whatever else is printed as its segments leave the layout,
before Rich adds its own styles. Line breaks and tabs are layout, and stay.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook, RenderResult
from rich.segment import Segment
from rich.text import Text

from tools.text_fields import BIDI_CONTROLS

__all__ = ["SHOWN", "console", "shown"]

_C0_PICTURES = {code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\t"}
_OTHERS = [*range(0x80, 0xA0)] + [
    code for code in range(0x2000, 0x2070) if unicodedata.bidirectional(chr(code)) in BIDI_CONTROLS
]
SHOWN = {**_C0_PICTURES, 0x7F: "\u2421", **{code: f"<U+{code:04X}>" for code in _OTHERS}}


def shown(text: str) -> str:
    """`text` with every character a terminal would act on replaced by its visible stand-in."""
    return text.translate(SHOWN)


class _Shown:
    """A renderable laid out as Rich lays it out, its text segments then passed through `shown`."""

    def __init__(self, renderable: RenderableType):
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            # Control segments are Rich's own cursor moves (a progress bar redrawing), not text.
            yield segment if segment.control else Segment(shown(segment.text), segment.style)


class _ShowControls(RenderHook):
    """A render hook: every renderable printed goes through `_Shown`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Shown(renderable) for renderable in renderables]


class _Terminal(Console):
    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(shown(text), **options)


def console(stderr: bool = False) -> Console:
    """A Rich console whose output shows control characters instead of sending them to the terminal."""
    terminal = _Terminal(stderr=stderr)
    terminal.push_render_hook(_ShowControls())
    return terminal
