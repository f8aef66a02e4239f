"""Expected (published) shape-bias values, read from ``modelval/data/expected_shape_bias.toml``."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from modelval.errors import DataError
from modelval.paths import package_data

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXPECTED_FILE = "expected_shape_bias.toml"


@dataclass(frozen=True)
class ExpectedShapeBias:
    model: str
    label: str
    value: float | None  # None: nothing published
    tolerance: float | None
    source: str
    also_published: tuple[tuple[float, str], ...] = ()
    baseline: str | None = None
    note: str = ""

    def verdict(self, measured: float) -> str:
        """ "PASS"/"FAIL" against a published value, "n/a" where none exists."""
        if self.value is None or self.tolerance is None or math.isnan(measured):
            return "n/a"
        return "PASS" if abs(measured - self.value) <= self.tolerance else "FAIL"


@lru_cache(maxsize=4)
def load_expected(path: Path | None = None) -> dict[str, Any]:
    path = path or package_data(EXPECTED_FILE)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"expected-values file not found: {path}") from None
    except tomllib.TOMLDecodeError as error:
        raise DataError(f"{path}: invalid TOML: {error}") from None


def expected_for(model: str, path: Path | None = None) -> ExpectedShapeBias | None:
    """The expected value of a registered model entry (by name), or None if it has no entry."""
    entry = load_expected(path).get("models", {}).get(model)
    if entry is None:
        return None
    return ExpectedShapeBias(
        model=model,
        label=entry.get("label", model),
        value=entry.get("expected"),
        tolerance=entry.get("tolerance"),
        source=entry.get("source", entry.get("note", "")),
        also_published=tuple((p["value"], p["source"]) for p in entry.get("also_published", [])),
        baseline=entry.get("baseline"),
        note=entry.get("note", ""),
    )


def deit_policy(path: Path | None = None) -> dict[str, Any]:
    return dict(load_expected(path).get("deit", {}))
