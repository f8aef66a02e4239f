"""The registry's committed baselines: a registered model's per-image decisions, kept in the package.

Where no shape bias is published, a run is compared with them (:func:`committed_baseline`); the judge
(:func:`modelval.judgement.verdicts.against_baseline`) holds it to at most a few flipped decisions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

#: The protocol a committed baseline of the package was made under when its ``.json`` sibling does not say.
STANDARD_PROTOCOL = {"normalization": "model", "resize": "none", "aggregation": "mean"}


@dataclass(frozen=True)
class CommittedBaseline:
    """A registered model's committed per-image decisions (``src/modelval/data/baselines``) beside a run.

    Where no shape bias is published, this is what a run can be compared with. ``applies`` says whether the
    run used the baseline's protocol on the same stimuli; only then are ``flips`` and ``shape_bias`` compared
    (``why_not`` says why not otherwise).
    """

    path: str
    applies: bool
    shape_bias: float | None = None
    flips: int | None = None
    images: int = 0
    max_flips: int = 0
    why_not: str = ""
    #: The decision file itself (the package's data).
    csv: str = ""

    @property
    def passed(self) -> bool:
        """At most ``max_flips`` decisions differ from the baseline's (``False`` when it does not apply)."""
        return self.applies and self.flips is not None and self.flips <= self.max_flips

    def describe(self) -> str:
        """One line: what was compared, or why the baseline does not apply."""
        if not self.applies:
            return f"its committed baseline {self.path} does not apply: {self.why_not}"
        return (
            f"compared with its committed baseline {self.path} (same protocol and stimuli): {self.flips} of "
            f"{self.images} decisions differ (allowed {self.max_flips}), baseline shape bias "
            f"{(self.shape_bias or math.nan) * 100:.2f}%"
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "applies": self.applies}
        if self.applies:
            out.update(shape_bias=self.shape_bias, flips=self.flips, images=self.images, max_flips=self.max_flips,
                       passed=self.passed)  # fmt: skip
        else:
            out["why_not"] = self.why_not
        return out


def committed_baseline(
    relpath: str,
    decisions: list[Any],
    protocol: dict[str, str],
    *,
    max_flips: int = 3,
    preprocessing: dict[str, Any] | None = None,
) -> CommittedBaseline:
    """Compare ``decisions`` with the committed baseline ``relpath`` (under the package's ``data/``) when the
    run's ``protocol`` (``normalization``, ``resize``, ``aggregation``, ``dataset``) is the baseline's; more than
    ``max_flips`` flipped decisions fail (the validation suite's ``verdicts.MAX_BASELINE_FLIPS``).

    Parameters
    ----------
    relpath
        The baseline's decision CSV under the package's ``data/``.
    decisions
        The run's decisions.
    protocol
        The run's ``normalization``, ``resize``, ``aggregation`` and ``dataset`` (those it states).
    max_flips
        Flipped decisions allowed.
    preprocessing
        The run's effective preprocessing (``PreprocessConfig.to_dict()``): a baseline whose recorded one differs
        is not compared, and ``why_not`` names each difference.

    Examples
    --------
    >>> from modelval.behaviour.decisions import read_decisions
    >>> from modelval.paths import package_data
    >>> same = read_decisions(package_data("baselines/efficientnet_lite0.csv"))
    >>> check = committed_baseline("baselines/efficientnet_lite0.csv", same, {"normalization": "model"})
    >>> check.flips, check.passed, round(check.shape_bias, 4)
    (0, True, 0.2394)
    >>> committed_baseline("baselines/efficientnet_lite0.csv", same, {"normalization": "imagenet"}).why_not
    'it was made with normalization model, this run used imagenet'
    """
    from modelval.behaviour.decisions import by_stimulus, read_decisions
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.paths import package_data

    shown = f"src/modelval/data/{relpath}"
    csv_path = package_data(relpath)
    found = str(csv_path)
    made_with = dict(STANDARD_PROTOCOL, dataset="cue-conflict")
    sibling = csv_path.with_suffix(".json")
    if sibling.is_file():
        header = json.loads(sibling.read_text())  # the full baseline of the same run: its protocol is recorded
        made_with.update({key: str(header[key]) for key in STANDARD_PROTOCOL if key in header})
    for key, value in made_with.items():
        if key in protocol and protocol[key] != value:
            return CommittedBaseline(shown, False, why_not=f"it was made with {key} {value}, this run used "
                                                           f"{protocol[key]}", csv=found)  # fmt: skip
    if preprocessing is not None and sibling.is_file():
        from modelval.judgement.baseline import describe_changes, preprocessing_changes

        changes = preprocessing_changes(header.get("preprocessing"), preprocessing)
        if changes:
            return CommittedBaseline(shown, False, csv=found, why_not=f"its preprocessing differs from this run's: "
                                                                      f"{describe_changes(changes)}")  # fmt: skip
    baseline = by_stimulus(read_decisions(csv_path))
    current = by_stimulus(decisions)
    if current.keys() != baseline.keys():
        return CommittedBaseline(shown, False, why_not=f"it covers {len(baseline)} stimuli, this run "
                                                       f"{len(current)} others", csv=found)  # fmt: skip
    flips = sum(current[name].response != baseline[name].response for name in current)
    baseline_bias = compute_shape_bias(list(baseline.values()), n_bootstrap=0).shape_bias
    return CommittedBaseline(shown, True, baseline_bias, flips, len(baseline), max_flips, csv=found)
