"""Fetch the vendor manuals a recipe file names into a git-ignored folder, each checked against its sha256.

    python scripts/fetch_manuals.py                              # held-out set -> devcorpus-pdfs/heldout
    python scripts/fetch_manuals.py --repos DIR                  # from repository snapshots already on disk (owner+name/repo)
    python scripts/fetch_manuals.py --recipes FILE --out DIR

A recipe (one JSON object a line, `scripts/data/heldout_manuals.jsonl`) names the local `file`, the GitHub `repo`,
the `commit` and `path` of the PDF in it and its `sha256`. The PDFs are vendor documents nobody may redistribute:
they are read from the repositories where others published them, never committed here (not the PDF, not its
pages' images, not its text). Without `--repos` each repository is cloned from GitHub (blobs on demand).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "scripts" / "data" / "heldout_manuals.jsonl"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", type=Path, default=RECIPES)
    ap.add_argument("--out", type=Path, default=ROOT / "devcorpus-pdfs" / "heldout")
    ap.add_argument("--repos", type=Path, help="folder of fetched snapshots laid out as <owner>+<name>/repo")
    args = ap.parse_args()
    recipes = [json.loads(line) for line in args.recipes.read_text(encoding="utf-8").splitlines() if line.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    clones = Path(tempfile.mkdtemp(prefix="manual-repos-"))
    failed = []
    for recipe in recipes:
        target = args.out / recipe["file"]
        if target.exists() and sha256(target.read_bytes()) == recipe["sha256"]:
            print(f"ok (already here) {recipe['file']}")
            continue
        git_dir = (snapshot(args.repos, recipe["repo"]) if args.repos else None) or clone(clones, recipe["repo"])
        data = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"{recipe['commit']}:{recipe['path']}"],
            capture_output=True,
            check=False,
        )
        if data.returncode != 0:
            failed.append(f"{recipe['file']}: git show failed in {git_dir}: {data.stderr.decode()[-200:].strip()}")
            continue
        if sha256(data.stdout) != recipe["sha256"]:
            failed.append(f"{recipe['file']}: sha256 {sha256(data.stdout)} is not the recipe's {recipe['sha256']}")
            continue
        target.write_bytes(data.stdout)
        print(f"ok {recipe['file']} ({len(data.stdout):,} bytes)")
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(root: Path, repo: str) -> Path | None:
    """The git directory of a fetched snapshot: bare, or a work tree's .git."""
    base = root / repo.replace("/", "+") / "repo"
    return next((d for d in (base / ".git", base) if (d / "HEAD").exists()), None)


def clone(into: Path, repo: str) -> Path:
    target = into / repo.replace("/", "+")
    if not target.exists():
        subprocess.run(
            ["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{repo}.git", str(target)],
            check=True,
        )
    return target


if __name__ == "__main__":
    sys.exit(main())
