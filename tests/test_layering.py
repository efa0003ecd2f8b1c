"""The one-way dependency direction: edge imports tools and knowledge, tools import knowledge, never back."""

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
    wrong = structure.Module("knowledge/bad.py", "def f():\n    from edge.loop import Step\n")
    assert structure.violations([wrong]) == ["knowledge/bad.py:2 imports edge"]
