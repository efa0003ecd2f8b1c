"""Render the demo plant's manuals (Hydra HP-200 press, Meridian VMC-850 machining centre;
V1.2 and V2.1; English and Chinese) as PDFs from knowledge/demo/manuals.json.

    .venv/bin/python scripts/make_demo_manuals.py [DIR] [--force]
    .venv/bin/fixloop index build DIR

DIR defaults to var/manuals. Existing PDFs are kept (so their content hash, and the
index's incremental reuse, stay stable) unless --force is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge.demo import demo_manuals, write_demo_manuals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory", nargs="?", type=Path, default=Path("var") / "manuals")
    parser.add_argument("--force", action="store_true", help="render again even if the PDFs exist")
    args = parser.parse_args()
    if args.force:  # only our own files: the folder may hold the plant's real manuals too
        for name in demo_manuals():
            (args.directory / name).unlink(missing_ok=True)
    for path in write_demo_manuals(args.directory):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
