"""Run stores of nightlies, made record by record as ``modelval validate`` writes them (the report's tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelval.records.run_store import RunStore

#: Real cue-conflict stimuli (shape, name): what the decisions of the synthetic cases are about.
STIMULI = [
    ("cat", "cat1-airplane1.png"), ("chair", "chair1-airplane2.png"), ("oven", "oven1-boat3.png"),
    ("bottle", "bottle1-bird3.png"), ("knife", "knife1-bird2.png"), ("clock", "clock1-bear1.png"),
]  # fmt: skip


def texture_of(name: str) -> str:
    return name.split("-")[1].removesuffix(".png").rstrip("0123456789")


def record_case(
    store: RunStore,
    model: str,
    session: str,
    created: str,
    *,
    passed: bool,
    shape_bias: float | None = 0.2,
    answers: str = "shape",
    status: str | None = None,
    error: str | None = None,
    device: str = "cuda",
) -> int:
    """One ``validate`` record: its summary as the runner writes it, and per-image decisions answering every
    stimulus by its ``shape`` or ``texture`` (or ``other``)."""
    summary: dict[str, Any] = {
        "label": model.upper(), "shape_bias": shape_bias, "ci95": [0.1, 0.3] if shape_bias is not None else None,
        "cue_accuracy": 0.7, "conflict_images": 1200, "expected": 0.2, "tolerance": 0.015,
        "expected_source": "Geirhos et al. 2019, Fig. 4",
        "difference": None if shape_bias is None else shape_bias - 0.2,
        "passed": passed, "status": status or ("pass" if passed else "fail"), "reason": "" if passed else "off",
        "verdict": "PASS" if passed else "FAIL",
        "per_category": {shape: {"category": shape, "shape_hits": 1, "texture_hits": 3, "other": 0,
                                 "shape_bias": 0.25 if shape != "clock" else None} for shape, _ in STIMULI},
    }  # fmt: skip
    if error is not None:
        summary.update(error_class="out of memory")
        summary.update(error=error, status="error", verdict="ERROR", reason=error, shape_bias=None, ci95=None,
                       difference=None, cue_accuracy=None)  # fmt: skip
    provenance = {
        "created": created, "session": session, "device": {"type": device}, "precision": "fp32",
        "command": f"modelval validate --models-file zoo.toml  # {model}", "modelval": "0.1.0", "python": "3.11",
        "packages": {"torch": "2.6.0", "torchvision": "0.21.0"}, "git": {"commit": "abc123"},
    }  # fmt: skip

    def answer(shape: str, name: str) -> str:
        return {"shape": shape, "texture": texture_of(name)}.get(answers, "knife" if shape != "knife" else "oven")

    decisions = {name: [shape, answer(shape, name)] for shape, name in STIMULI} if error is None else None
    return store.record("validate", model=model, dataset="cue-conflict", label="model (half)", summary=summary,
                        provenance=provenance, decisions=decisions)  # fmt: skip


def two_nightlies(folder: Path) -> tuple[RunStore, Path]:
    """Night 1: ``steady`` and ``regressed`` pass, ``repaired`` fails (a known failure). Night 2: ``regressed``
    fails (its decisions turned from shape to texture answers), ``repaired`` passes, ``steady`` passes, ``broken``
    runs out of memory, and ``absent`` (listed) never runs."""
    store = RunStore(folder / "runs.sqlite")
    for model, passed in (("steady", True), ("regressed", True), ("repaired", False)):
        record_case(store, model, "night-1", "2026-11-26T02:00:00+00:00", passed=passed,
                    answers="shape" if passed else "texture")  # fmt: skip
    record_case(store, "steady", "night-2", "2026-11-27T02:00:00+00:00", passed=True)
    record_case(store, "regressed", "night-2", "2026-11-27T02:01:00+00:00", passed=False, shape_bias=0.05,
                answers="texture")  # fmt: skip
    record_case(store, "repaired", "night-2", "2026-11-27T02:02:00+00:00", passed=True)
    record_case(store, "broken", "night-2", "2026-11-27T02:03:00+00:00", passed=False,
                error="CUDA out of memory while running the model (batch 256)")  # fmt: skip
    status = folder / "status.toml"
    status.write_text(
        '[models.steady]\n"model/cuda/fp32" = "pass"\n[models.regressed]\n"model/cuda/fp32" = "pass"\n'
        '[models.repaired]\n"model/cuda/fp32" = { status = "known-failure", reason = "issue 12: wrong mean" }\n'
        '[models.broken]\n"model/cuda/fp32" = "pass"\n[models.absent]\n"model/cuda/fp32" = "pass"\n'
    )
    return store, status
