"""The manual index a command reads, there before the command needs it.

The embedded demo plant's manuals ship with fixloop, so its index is built on
first use, as `fixloop demo` builds it (demo PDFs into `<state dir>/manuals`,
then only what is missing is indexed), and rebuilt when an upgrade extracts
manuals differently. A plant's own config never builds anything behind the
operator's back: a missing index is an error that names `fixloop index build`.

    path = ensure_index(config)   # IndexNotBuilt with a plant's config and no index
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from edge.config import Config


class IndexNotBuilt(Exception):
    """A plant's config names a manual index that does not exist yet; the message says how to build it."""


def configured_index(config: Config) -> Path:
    """The index file of `[knowledge] index_file` (relative to the state directory unless absolute)."""
    return config.state_path(config.knowledge.index_file)


def ensure_index(config: Config, announce: Callable[[str], None] | None = None) -> Path:
    """The configured index file, built first if it is missing and the config is the embedded demo plant.

    `announce` gets one line before a build starts (default: stderr), so a first
    command that takes seconds longer says why.
    """
    path = configured_index(config)
    if not config.is_embedded_demo:
        if path.exists():
            return path
        raise IndexNotBuilt(
            f"no manual index at {path} ({config.source}); build it with `fixloop index build <manual PDFs or folders>`"
        )
    from knowledge.ingest import outdated

    # An upgrade that reads manuals better rebuilds the demo's index; a plant's is rebuilt by its operator.
    exists = path.exists()
    why = outdated(path) if exists else None
    if exists and why is None:
        return path
    (announce or _to_stderr)(
        f"fixloop: the demo plant's manual index at {path} was built by another fixloop ({why}): rebuilding it …"
        if why
        else f"fixloop: first use of the demo plant: building its manual index at {path} "
        f"(demo PDFs in {Path(config.state_dir) / 'manuals'}) …"
    )
    from knowledge.demo import build_demo_index  # renders PDFs and embeds: only when there is work to do

    return build_demo_index(Path(config.state_dir), config.knowledge.model_path, path)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
