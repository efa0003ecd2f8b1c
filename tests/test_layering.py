"""The one-way dependency direction: edge imports tools and knowledge, tools import knowledge, never back;
inside edge/, the run sees no planner and the planners do not see each other; inside knowledge/, ingestion
does not see search."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "code_structure.py"


def code_structure():
    spec = importlib.util.spec_from_file_location("code_structure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is loading
    spec.loader.exec_module(module)
    return module


def test_no_package_imports_one_above_it():
    structure = code_structure()
    assert structure.violations(structure.modules(None)) == []


def test_an_import_against_the_direction_is_reported():
    structure = code_structure()
    wrong = structure.Module("knowledge/bad.py", "def f():\n    from edge.run.loop import Step\n")
    assert structure.violations([wrong]) == ["knowledge/bad.py:2 imports edge"]


def test_the_run_importing_a_planner_is_reported():
    structure = code_structure()
    wrong = structure.Module(
        "edge/run/bad.py", "from edge.rules.planner import RulesPlanner\nfrom edge.config import Config\n"
    )
    assert structure.violations([wrong]) == ["edge/run/bad.py:1 imports edge.rules"]


def test_one_planner_importing_the_other_is_reported():
    structure = code_structure()
    wrong = structure.Module("edge/llm/bad.py", "def f():\n    import edge.rules.lexicon\n")
    assert structure.violations([wrong]) == ["edge/llm/bad.py:2 imports edge.rules"]


def test_ingestion_importing_search_is_reported():
    structure = code_structure()
    wrong = structure.Module("knowledge/ingest/bad.py", "from knowledge.search.rows import IndexRow\n")
    assert structure.violations([wrong]) == ["knowledge/ingest/bad.py:1 imports knowledge.search"]
