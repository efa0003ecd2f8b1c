"""A package's API imported on first use: `__getattr__` and `__dir__` for its `__init__`.

    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

`_EXPORTS` maps each exported name to the module that defines it. Importing the package then
costs nothing; `from package import Name` costs what importing Name's own module does.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)  # the next lookup is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
