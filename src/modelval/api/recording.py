"""What the front-door functions share: strict JSON text of a result, the provenance of a result
recomputed from a decision file, and the run store's label of a protocol (``modelval runs``)."""

from __future__ import annotations

import os
from typing import Any

from modelval import jsonio
from modelval.api.options import EvaluationOptions


class JSONResult:
    """``to_json()`` for results whose ``to_dict()`` is JSON-ready (undefined numbers become null)."""

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def to_json(self, indent: int | None = 2) -> str:
        return jsonio.dumps(self.to_dict(), indent=indent)


def protocol_label(options: EvaluationOptions) -> str:
    """How a run was made, as the run store's label: runs with the same label are comparable."""
    protocol = f"normalization={options.normalization} resize={options.resize} aggregation={options.aggregation}"
    return f"{options.dataset}: {protocol}"


def decision_file_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record of a result recomputed from a decision file: the environment and the file's digest."""
    from modelval.records.provenance import environment, file_digest

    return {**environment(), "decisions_file": {"path": str(path), "sha256": file_digest(path)}}
