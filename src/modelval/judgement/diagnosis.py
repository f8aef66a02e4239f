"""Why does a shape-bias number differ from the expected one? Calculation, preprocessing or source.

Each check is cheap and runs offline:

- **calculation**: the published ResNet-50 decisions (texture-vs-shape raw data) must give exactly
  162 shape and 572 texture hits (shape bias 0.2207). If not, the counting or the 16-class mapping
  is wrong, and no model number can be trusted.
- **preprocessing**: the configuration actually used is compared with the model's reference
  configuration (mean, std, interpolation) and with the stimulus protocol (no resize, no crop).
- **model source**: for models available from several sources, the other sources' results on the
  same stimuli (same weights, so they must agree), plus the offline source-equivalence check where
  one is registered for the family.

:func:`diagnose` turns the checks into the sentence a failing test prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from modelval.preprocessing import PreprocessConfig

PUBLISHED_RESNET50 = {"shape_hits": 162, "texture_hits": 572}


@dataclass(frozen=True)
class Check:
    name: str  # "calculation", "preprocessing", "model source"
    ok: bool | None  # None: could not be run (what is missing is in ``detail``)
    detail: str

    def line(self) -> str:
        mark = {True: "ok", False: "PROBLEM", None: "not checked"}[self.ok]
        return f"  [{mark}] {self.name}: {self.detail}"

    def to_dict(self) -> dict[str, object]:
        return {"check": self.name, "ok": self.ok, "detail": self.detail}


def check_calculation(reference_csv: Path | None) -> Check:
    """Recompute the paper's ResNet-50 numbers from the published per-image decisions.

    Parameters
    ----------
    reference_csv
        The published ResNet-50 decision file (``None``: not available, the check does not run).
    """
    from modelval.behaviour.decisions import read_decisions
    from modelval.behaviour.shape_bias import compute_shape_bias

    if reference_csv is None or not Path(reference_csv).is_file():
        return Check("calculation", None, f"published ResNet-50 decisions not found ({reference_csv})")
    result = compute_shape_bias(read_decisions(reference_csv), n_bootstrap=0)
    got = {"shape_hits": result.shape_hits, "texture_hits": result.texture_hits}
    if got == PUBLISHED_RESNET50:
        return Check("calculation", True, "published ResNet-50 decisions reproduce 162/572 hits (0.2207)")
    return Check("calculation", False, f"published ResNet-50 decisions give {got}, expected {PUBLISHED_RESNET50}")


def check_preprocessing(used: PreprocessConfig, reference: PreprocessConfig) -> Check:
    """Compare the preprocessing used with the model's reference config and the stimulus protocol.

    Parameters
    ----------
    used
        The preprocessing the run used.
    reference
        The model's own.
    """
    problems = []
    if not (_close(used.mean, reference.mean) and _close(used.std, reference.std)):
        problems.append(
            f"normalization {used.normalization_name} (mean {used.mean}, std {used.std}) differs from the model's "
            f"{reference.normalization_name} (mean {reference.mean}, std {reference.std})"
        )
    if used.resize is not None or used.crop is not None:
        problems.append(f"resize {used.resize}/crop {used.crop} applied to 224 px stimuli (official protocol: none)")
    if used.resize is not None and used.interpolation != reference.interpolation:
        problems.append(f"interpolation {used.interpolation}, model trained with {reference.interpolation}")
    if problems:
        return Check("preprocessing", False, "; ".join(problems))
    return Check("preprocessing", True, f"matches the model's config ({used.describe()})")


def check_sources(
    model: str,
    shape_bias: float,
    others: dict[str, float],
    *,
    tolerance: float,
    equivalence: Callable[[], tuple[bool, str]] | None = None,
) -> Check:
    """Compare with the same weights loaded from other sources, and run the offline equivalence check.

    Parameters
    ----------
    model
        The model's name.
    shape_bias
        Its measured shape bias.
    others
        The shape bias of the same weights from each other source, by source.
    tolerance
        How far a source may be from the measured value.
    equivalence
        The offline check that the sources hold the same weights (``None``: none).
    """
    notes = []
    ok: bool | None = None
    if others:
        spread = {name: value - shape_bias for name, value in others.items() if not math.isnan(value)}
        off = {n: d for n, d in spread.items() if abs(d) > tolerance}
        ok = not off
        notes.append(
            "other sources: "
            + ", ".join(f"{n} {others[n] * 100:.2f}% ({d * 100:+.2f} pp)" for n, d in sorted(spread.items()))
        )
    if equivalence is not None:
        equal, detail = equivalence()
        ok = equal if ok is None else (ok and equal)
        notes.append(detail)
    if not notes:
        return Check("model source", None, f"{model} has a single source; nothing to compare with")
    return Check("model source", ok, "; ".join(notes))


def _close(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(abs(x - y) < 1e-6 for x, y in zip(a, b, strict=True))


def implicated(checks: Sequence[Check]) -> str:
    """What the checks implicate, in order: calculation, then preprocessing, then model source (one line).

    Parameters
    ----------
    checks
        The checks that ran.
    """
    names = [c.name for c in checks if c.ok is False]
    if "calculation" in names:
        return "CALCULATION is implicated: the counting/mapping does not reproduce published data"
    if "preprocessing" in names:
        return "PREPROCESSING is implicated: the input pipeline differs from the model's"
    if "model source" in names:
        return "MODEL SOURCE is implicated: the same weights from another source give another number"
    if all(c.ok for c in checks):
        return (
            "calculation, preprocessing and source checks pass: suspect the WEIGHTS themselves "
            "(wrong or different checkpoint than the published one) or the expected value"
        )
    return "no check failed, but some could not run (see below)"


def diagnose(checks: Sequence[Check]) -> str:
    """The diagnosis a failing case prints: what is implicated, then each check's line.

    Parameters
    ----------
    checks
        The checks that ran.
    """
    return "\n".join(["Diagnosis: " + implicated(checks), *(c.line() for c in checks)])
