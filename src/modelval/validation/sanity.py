"""The sanity gate: no shape bias is reported for a model that does not behave like a working classifier.

Cue-conflict accuracy = (shape hits + texture hits) / conflict images: the fraction of images where
the model named *one* of the two categories present. In the published decision files models score
0.42-0.89 and the ten human observers 0.66-0.88; a model guessing among 16 categories scores about
2/16 = 0.125. Below :data:`SANITY_THRESHOLD` the shape bias is a ratio of two small numbers of
lucky hits and means nothing, so the verdict is ``NOT A WORKING CLASSIFIER``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from modelval.behaviour.shape_bias import ShapeBiasResult

SANITY_THRESHOLD = 0.30
VERDICT = "NOT A WORKING CLASSIFIER"
LIKELY_CAUSES = (
    "the weights were not loaded (a randomly initialised network)",
    "a wrong label map (the output indices are not ImageNet-1k's)",
    "a wrong normalization or input scaling (e.g. 0-255 instead of 0-1)",
)


@dataclass(frozen=True)
class Sanity:
    passed: bool
    cue_accuracy: float
    threshold: float = SANITY_THRESHOLD

    def to_dict(self) -> dict[str, object]:
        return {"passed": self.passed, "cue_accuracy": self.cue_accuracy, "threshold": self.threshold}

    def message(self) -> str:
        if self.passed:
            return f"sanity: passed (cue-conflict accuracy {self.cue_accuracy:.2%} >= {self.threshold:.0%})"
        return (
            f"{VERDICT}: cue-conflict accuracy {self.cue_accuracy:.2%} is below {self.threshold:.0%} (chance is "
            f"about 12.5%); likely causes: {'; '.join(LIKELY_CAUSES)}. The shape bias is not reported as a result; "
            "--no-sanity-gate turns this check off"
        )


def sanity_check(result: ShapeBiasResult, threshold: float = SANITY_THRESHOLD) -> Sanity:
    """Whether the decisions behind ``result`` look like a working ImageNet classifier's."""
    accuracy = result.cue_accuracy
    return Sanity(passed=not math.isnan(accuracy) and accuracy >= threshold, cue_accuracy=accuracy, threshold=threshold)
