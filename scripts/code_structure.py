"""The codebase's shape: modules with their line counts, the longest functions, and who imports whom.

    python scripts/code_structure.py                 # the working tree
    python scripts/code_structure.py --rev 623563e   # a commit, read from git without checking it out

The import direction is edge -> tools -> knowledge; an import against it is listed as a violation
(tests/test_layering.py keeps the working tree free of them). Inside edge/, the rooms a run is made of
import only the rooms beneath them: the run (edge.run) sees no planner, the two planners (edge.rules,
edge.llm) never see each other (edge.planning composes them), and none of them sees the surfaces above
(service, CLI, evaluation). Inside knowledge/, ingestion (knowledge.ingest) never imports search
(knowledge.search): a build runs without a search's stages, and search reads what the build wrote.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("edge", "tools", "knowledge")
# A package may import the ones after it, never the ones before it.
LAYER = {name: rank for rank, name in enumerate(PACKAGES)}
# The rooms of edge/ that may import only the listed rooms of edge/; the others (the surfaces: cli, service,
# evaluation, doctor, MCP) assemble them and may import any.
EDGE_ROOMS_BENEATH = {
    "edge.config": {"edge.llm"},  # the model profiles a config names
    "edge.run": {"edge.config"},
    "edge.rules": {"edge.run", "edge.config"},
    "edge.llm": {"edge.run", "edge.config"},
    "edge.telemetry": {"edge.run", "edge.config"},
    "edge.planning": {"edge.run", "edge.rules", "edge.llm", "edge.config"},
    "edge.agent": {"edge.run", "edge.rules", "edge.llm", "edge.planning", "edge.config", "edge.telemetry"},
}

# Rooms of knowledge/ and the room each must not import.
KNOWLEDGE_ROOMS_APART = {"knowledge.ingest": "knowledge.search"}


@dataclass(frozen=True)
class Module:
    path: str
    source: str

    @property
    def name(self) -> str:
        return self.path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")

    @property
    def package(self) -> str:
        return self.path.split("/", 1)[0]

    @property
    def room(self) -> str:
        return room_of(self.name)

    @property
    def lines(self) -> int:
        return len(self.source.splitlines())


def modules(rev: str | None) -> list[Module]:
    if rev is None:
        return [
            Module(str(p.relative_to(ROOT)), p.read_text())
            for name in PACKAGES
            for p in sorted((ROOT / name).rglob("*.py"))
        ]
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, *PACKAGES], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return [
        Module(
            path,
            subprocess.run(
                ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
            ).stdout,
        )
        for path in listing
        if path.endswith(".py")
    ]


def functions(module: Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            yield node.end_lineno - node.lineno + 1, f"{module.name}.{node.name}"


def room_of(name: str) -> str:
    """`edge.run.loop` -> `edge.run`, `edge.agent` -> `edge.agent`; outside edge/ the package is the room."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "edge" and len(parts) > 1 else parts[0]


def imported_modules(module: Module) -> Iterator[tuple[str, int]]:
    """Every import of one of our modules, with its line; lazy imports inside functions count too."""
    for node in ast.walk(ast.parse(module.source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".", 1)[0] in LAYER:
                yield name, node.lineno


def imported_packages(module: Module) -> Iterator[tuple[str, int]]:
    for name, line in imported_modules(module):
        yield name.split(".", 1)[0], line


def violations(found: list[Module]) -> list[str]:
    against_layers = [
        f"{m.path}:{line} imports {target}"
        for m in found
        for target, line in imported_packages(m)
        if LAYER[target] < LAYER[m.package]
    ]
    against_rooms = [
        f"{m.path}:{line} imports {room_of(target)}"
        for m in found
        if m.room in EDGE_ROOMS_BENEATH
        for target, line in imported_modules(m)
        if target.startswith("edge") and room_of(target) not in EDGE_ROOMS_BENEATH[m.room] | {m.room}
    ]
    apart = [
        f"{m.path}:{line} imports {KNOWLEDGE_ROOMS_APART[room]}"
        for m in found
        for room in KNOWLEDGE_ROOMS_APART
        if m.name == room or m.name.startswith(room + ".")
        for target, line in imported_modules(m)
        if target == KNOWLEDGE_ROOMS_APART[room] or target.startswith(KNOWLEDGE_ROOMS_APART[room] + ".")
    ]
    return against_layers + against_rooms + apart


def report(found: list[Module], longest: int) -> None:
    print(f"{len(found)} modules, {sum(m.lines for m in found)} lines")
    for package in PACKAGES:
        mine = [m for m in found if m.package == package]
        print(f"\n{package}/: {len(mine)} modules, {sum(m.lines for m in mine)} lines")
        for m in sorted(mine, key=lambda m: -m.lines):
            print(f"  {m.lines:5d}  {m.path}")
    sizes = sorted((size, name) for m in found for size, name in functions(m))
    print(f"\n{len(sizes)} functions, median {statistics.median(s for s, _ in sizes):g} lines; the longest:")
    for size, name in sizes[::-1][:longest]:
        print(f"  {size:4d}  {name}")
    edges = Counter((m.package, target) for m in found for target, _ in imported_packages(m) if target != m.package)
    print("\nimports between packages (importing -> imported: import statements)")
    for (source, target), count in sorted(edges.items()):
        print(f"  {source} -> {target}: {count}")
    rooms = Counter(
        (m.room, room_of(target))
        for m in found
        if m.package == "edge"
        for target, _ in imported_modules(m)
        if target.startswith("edge") and room_of(target) != m.room
    )
    print("\nimports between the rooms of edge/ (importing -> imported: import statements)")
    for (source, target), count in sorted(rooms.items()):
        print(f"  {source} -> {target}: {count}")
    wrong = violations(found)
    print(f"\nimports against edge -> tools -> knowledge, or against the rooms of edge/ and knowledge/: {len(wrong)}")
    for line in wrong:
        print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rev", help="a git revision instead of the working tree")
    parser.add_argument("--longest", type=int, default=15, help="how many of the longest functions to list")
    args = parser.parse_args()
    report(modules(args.rev), args.longest)


if __name__ == "__main__":
    main()
