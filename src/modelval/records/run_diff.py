"""What differs between two recorded runs: the numbers that moved, the decisions that flipped (per category),
the provenance fields that differ ("torch 2.15.0 -> 2.16.0, resize none -> 256")."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from modelval.errors import DataError
from modelval.records.run_store import VOLATILE, RunRecord, RunStore, RunStoreWarning


def since_last_run(store: RunStore | None, run_id: int | None) -> RunDiff | None:
    """The difference between recorded run ``run_id`` of ``store`` and the run before it of the same command,
    model and label (``None`` when nothing was recorded or there is no earlier run).

    Parameters
    ----------
    store
        The run store, or ``None``.
    run_id
        The recorded run's id, or ``None``.
    """
    if store is None or run_id is None:
        return None
    try:
        run = store.get(run_id)
        earlier = store.previous(run)
    except DataError as error:
        warnings.warn(f"the run store could not be read: {error}", RunStoreWarning, stacklevel=2)
        return None
    return None if earlier is None else diff_runs(earlier, run)


# --- comparing two runs ------------------------------------------------------------------------


@dataclass
class RunDiff:
    """What differs between run ``a`` and run ``b``."""

    a: RunRecord
    b: RunRecord
    #: summary key -> (a's value, b's value), for the values that differ
    values: dict[str, tuple[Any, Any]]
    #: category -> number of images of that category whose decision differs (only images in both runs)
    flips: dict[str, int]
    flipped_images: list[str]
    compared_images: int
    #: provenance field (dotted path) -> (a's value, b's value)
    provenance: dict[str, tuple[Any, Any]]

    def provenance_text(self) -> str:
        """``torch 2.15.0 → 2.16.0, resize none → 256``: each differing field by its last name (once)."""
        parts = [f"{_short(path)} {_plain(old)} → {_plain(new)}" for path, (old, new) in self.provenance.items()]
        return ", ".join(dict.fromkeys(parts)) or "no provenance field differs"

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a.id,
            "b": self.b.id,
            "values": {key: {"a": old, "b": new} for key, (old, new) in self.values.items()},
            "flips": {
                "total": len(self.flipped_images),
                "images_compared": self.compared_images,
                "per_category": self.flips,
                "images": self.flipped_images,
            },
            "provenance": {key: {"a": old, "b": new} for key, (old, new) in self.provenance.items()},
            "provenance_text": self.provenance_text(),
        }

    def format(self) -> str:
        lines = [f"run {self.a.id} ({self.a.created}) -> run {self.b.id} ({self.b.created})"]
        if self.values:
            for key, (old, new) in self.values.items():
                lines.append(f"  {key}: {_plain(old)} → {_plain(new)}")
        else:
            lines.append("  no reported value differs")
        if self.compared_images:
            per_category = ", ".join(f"{c} {n}" for c, n in self.flips.items() if n)
            lines.append(f"  decisions flipped: {len(self.flipped_images)} of {self.compared_images}"
                         + (f" ({per_category})" if per_category else ""))  # fmt: skip
        lines.append(f"  provenance: {self.provenance_text()}")
        return "\n".join(lines)


def diff_runs(a: RunRecord, b: RunRecord) -> RunDiff:
    """What differs from run ``a`` to run ``b``: each summary value that changed, and the decisions that flipped.

    Parameters
    ----------
    a
        The earlier run.
    b
        The later run.
    """
    values = {
        key: (a.summary.get(key), b.summary.get(key))
        for key in dict.fromkeys([*a.summary, *b.summary])
        if a.summary.get(key) != b.summary.get(key)
    }
    flips: dict[str, int] = {}
    flipped: list[str] = []
    compared = 0
    if a.decisions is not None and b.decisions is not None:
        for image, (category, response) in a.decisions.items():
            if image not in b.decisions:
                continue
            compared += 1
            flips.setdefault(category, 0)
            if b.decisions[image][1] != response:
                flips[category] += 1
                flipped.append(image)
    first, second = _flatten(a.provenance), _flatten(b.provenance)
    provenance = {
        path: (first.get(path), second.get(path))
        for path in dict.fromkeys([*first, *second])
        if first.get(path) != second.get(path) and path.rsplit(".", 1)[-1] not in VOLATILE
    }
    return RunDiff(a, b, values, dict(sorted(flips.items())), flipped, compared, provenance)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            if str(key) in VOLATILE:
                continue
            flat.update(_flatten(inner, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: value}


def _short(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _plain(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
