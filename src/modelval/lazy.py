"""Re-exports that load on first use, so importing a package does not import torch.

A package's ``__init__`` names its public objects and the submodule defining each; the submodule is
imported when the name is first read (PEP 562). ``dir(package)`` lists every public name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose public names come from ``exports`` (name -> module).

    Parameters
    ----------
    package
        The package's ``__name__``.
    exports
        Each exported name and the module it lives in.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(set(exports) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__
