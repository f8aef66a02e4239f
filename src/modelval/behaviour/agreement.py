"""The humans' mutual error consistency: every pair of distinct human observers of one dataset."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

import numpy as np

from modelval.behaviour.consistency import ObserverVectors, pair_consistency
from modelval.errors import DataError


class Panel(Protocol):
    """What the agreement reads of a :class:`~modelval.behaviour.humans.HumanPanel` (which imports this module)."""

    def vectors(self) -> dict[str, ObserverVectors]: ...


@dataclass(frozen=True)
class HumanAgreement:
    """The humans' mutual error consistency: every pair of distinct observers (some left out, if asked)."""

    mean: float
    pairs: dict[tuple[str, str], float]
    per_observer: dict[str, float]  # each observer's mean kappa with the others
    kappa_max: dict[tuple[str, str], float] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    na_handling: str = "wrong"

    @property
    def range(self) -> tuple[float, float]:
        values = list(self.per_observer.values())
        return min(values), max(values)

    @property
    def mean_kappa_max(self) -> float:
        return float(np.mean(list(self.kappa_max.values()))) if self.kappa_max else math.nan


#: The former name: the humans' mutual kappa is not a ceiling for a model (see HumanAgreement).
HumanCeiling = HumanAgreement


def human_agreement(panel: Panel, *, leave_out: Sequence[str] = (), na_handling: str = "wrong") -> HumanAgreement:
    """Mean kappa over all pairs of distinct human observers, the observers in ``leave_out`` left out.

    Parameters
    ----------
    panel
        The human observers of one dataset.
    leave_out
        Observers to leave out.
    na_handling
        How a "na" answer counts: ``"wrong"`` or ``"exclude"``.
    """
    vectors = {name: v for name, v in panel.vectors().items() if name not in leave_out}
    if len(vectors) < 2:
        raise DataError("the humans' mutual error consistency needs at least two human observers")
    names = sorted(vectors)
    consistency = {(a, b): pair_consistency(vectors[a], vectors[b], na_handling) for a, b in combinations(names, 2)}
    pairs = {pair: c.kappa for pair, c in consistency.items()}
    per_observer = {name: float(np.mean([k for pair, k in pairs.items() if name in pair])) for name in names}
    return HumanAgreement(
        float(np.mean(list(pairs.values()))),
        pairs,
        per_observer,
        {pair: c.kappa_max for pair, c in consistency.items()},
        tuple(sorted(leave_out)),
        na_handling,
    )


def human_ceiling(panel: Panel) -> HumanAgreement:
    """The former name of :func:`human_agreement` (all observers; it is no ceiling for a model).

    Parameters
    ----------
    panel
        The human observers of one dataset.
    """
    return human_agreement(panel)
