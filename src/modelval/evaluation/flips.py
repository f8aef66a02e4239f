"""Decisions that differ between two runs of the same stimuli (fp32 against bf16 autocast, or a baseline)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from modelval.behaviour.decisions import Decision

#: Share of decisions allowed to flip under --amp against fp32 before the suite warns.
AMP_FLIP_WARN_RATE = 0.01


@dataclass(frozen=True)
class FlipReport:
    """Decisions that differ between a reference run (fp32) and a candidate run (e.g. bf16 autocast)."""

    total: int
    flipped: list[str]  # "name: reference -> candidate"
    #: The flips allowed (a model's ``flip_budget`` for this device and dtype), or None when none is stated.
    budget: int | None = None
    #: The expectation entry the budget came from (``"cuda/bf16"``), for messages.
    budget_entry: str | None = None

    @property
    def within_budget(self) -> bool | None:
        """Whether the flips are within :attr:`budget` (None when no budget is stated)."""
        return None if self.budget is None else self.count <= self.budget

    @property
    def count(self) -> int:
        return len(self.flipped)

    @property
    def rate(self) -> float:
        return self.count / self.total if self.total else 0.0

    def describe(self) -> str:
        return f"{self.count}/{self.total} decisions flipped ({100 * self.rate:.2f}%)"


def decision_flips(
    reference: Sequence[Decision],
    candidate: Sequence[Decision],
    *,
    warn_rate: float | None = AMP_FLIP_WARN_RATE,
    budget: int | None = None,
    budget_entry: str | None = None,
) -> FlipReport:
    """Compare two runs image by image; warn when more than ``warn_rate`` of the decisions flipped, or, when the
    model states a flip ``budget`` for this device and dtype (``budget_entry``: the expectation entry it came
    from, :mod:`modelval.judgement.expected`), when more than ``budget`` decisions flipped. ``warn_rate=None``
    never warns.

    Parameters
    ----------
    reference
        The reference run's decisions (fp32, CPU).
    candidate
        The other run's decisions, on the same stimuli.
    warn_rate
        Warn above this share of flipped decisions (``None``: never).
    budget
        The flips the model's expectation allows on this device and dtype.
    budget_entry
        The expectation entry the budget came from.
    """
    if [d.imagename for d in reference] != [d.imagename for d in candidate]:
        raise ValueError("the two runs must cover the same stimuli in the same order")
    flipped = [
        f"{a.imagename}: {a.response} -> {b.response}"
        for a, b in zip(reference, candidate, strict=True)
        if a.response != b.response
    ]
    report = FlipReport(len(reference), flipped, budget, budget_entry)
    if budget is not None:
        if warn_rate is not None and report.count > budget:
            entry = f" [{budget_entry}]" if budget_entry else ""
            warnings.warn(
                f"{report.describe()} against fp32, above the model's flip budget of {budget}{entry}; "
                "validate with fp32 (the default) before trusting these numbers",
                AmpFlipWarning,
                stacklevel=2,
            )
        return report
    if warn_rate is not None and report.rate > warn_rate:
        warnings.warn(
            f"{report.describe()} against fp32, above the {100 * warn_rate:.1f}% threshold; "
            "validate with fp32 (the default) before trusting these numbers",
            AmpFlipWarning,
            stacklevel=2,
        )
    return report


class AmpFlipWarning(UserWarning):
    """Mixed precision changed more decisions than the model's flip budget (or, without one,
    :data:`AMP_FLIP_WARN_RATE`) allows."""
