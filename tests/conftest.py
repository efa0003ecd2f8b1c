"""Shared test set-up: offline model loading, and each area's fixtures from tests/fixtures/."""

import os
import pkgutil

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Fixture modules import each other: rewrite their asserts whichever pytest loads first.
pytest.register_assert_rewrite("tests.fixtures")

import tests.fixtures as _fixtures  # noqa: E402

pytest_plugins = [f"tests.fixtures.{m.name}" for m in pkgutil.iter_modules(_fixtures.__path__)]
