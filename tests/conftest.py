"""Shared test set-up: offline model loading, and each area's fixtures from tests/fixtures/."""

import os
import pkgutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import tests.fixtures as _fixtures

pytest_plugins = [f"tests.fixtures.{m.name}" for m in pkgutil.iter_modules(_fixtures.__path__)]
