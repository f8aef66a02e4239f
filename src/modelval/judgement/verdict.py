"""A verdict as data: what it is, whether it passed, why, against which expectation, the flips and the diagnosis.

Every judge of modelval (:func:`modelval.judgement.verdicts.judge`, the baseline comparison, the sanity gate)
returns a :class:`Verdict`; every output carries it as fields (``passed``, ``status``, ``reason``, ...) and
renders its text from it. Nothing reads a verdict's text back: the nightly takes ``passed`` from the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelval.behaviour.decisions import Decision
    from modelval.judgement.diagnosis import Check

#: What a verdict can be. ``pass``/``fail``: against a published value, an expectation or a baseline;
#: ``finding``: nothing to hold it against (passes); ``detected``/``not-detected``: a wrong normalization's change;
#: ``withheld``: not a working classifier (the sanity gate); ``suspect``: an alternative preprocessing answers better
#: than the declared one (the self-check, or a "wrong" normalization); ``error``: the model could not be loaded or
#: run; ``n/a``: nothing was judged.
STATUSES: tuple[str, ...] = (
    "pass", "fail", "finding", "detected", "not-detected", "withheld", "suspect", "error", "n/a",
)  # fmt: skip
#: How many flipped stimuli a verdict lists by name (the count and the counts by transition cover them all).
LISTED_FLIPS = 30


def answer_kind(shape: str, texture: str, response: str) -> str:
    """What an answer to a cue-conflict stimulus is: ``shape``, ``texture`` or ``other`` (for a stimulus whose shape
    and texture are one category, a right answer is ``shape``).

    Parameters
    ----------
    shape, texture
        The stimulus's shape and texture category.
    response
        The observer's answer.
    """
    if response == shape:
        return "shape"
    return "texture" if response == texture else "other"


@dataclass(frozen=True)
class Flips:
    """Decisions that changed between two runs of the same stimuli: how many, how many were allowed, the counts by
    transition (``shape -> texture``: a shape answer became a texture answer) and every flipped stimulus."""

    count: int
    images: int
    allowed: int | None = None
    by_transition: dict[str, int] = field(default_factory=dict)
    #: ``image: before -> after``, every flip, sorted by image name.
    listed: tuple[str, ...] = ()
    #: The expectation entry the allowance came from (``cuda/bf16``), when it is a model's flip budget.
    budget_entry: str | None = None

    @property
    def within(self) -> bool:
        """At most ``allowed`` flips (``True`` when nothing is allowed or forbidden)."""
        return self.allowed is None or self.count <= self.allowed

    def lines(self, limit: int = LISTED_FLIPS) -> list[str]:
        """The counts by transition, then the first ``limit`` flips and how many more there are.

        Parameters
        ----------
        limit
            How many flipped stimuli to name.
        """
        lines = []
        if self.by_transition:
            lines.append("by transition: " + ", ".join(f"{k} {v}" for k, v in self.by_transition.items()))
        lines += [f"  {line}" for line in self.listed[:limit]]
        if len(self.listed) > limit:
            lines.append(f"  ... and {len(self.listed) - limit} more")
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "images": self.images,
            "allowed": self.allowed,
            "budget_entry": self.budget_entry,
            "by_transition": dict(self.by_transition),
            "first": list(self.listed[:LISTED_FLIPS]),
            "more": max(0, len(self.listed) - LISTED_FLIPS),
        }


def flips_between(
    before: Sequence[Decision],
    after: Sequence[Decision],
    *,
    allowed: int | None = None,
    budget_entry: str | None = None,
) -> Flips:
    """The :class:`Flips` from ``before``'s decisions to ``after``'s, matched by image name.

    Parameters
    ----------
    before, after
        The two runs' decisions on the same stimuli (a baseline's and a fresh run's).
    allowed
        How many flips pass (``None``: no limit).
    budget_entry
        The expectation entry ``allowed`` came from.
    """
    earlier = {d.imagename: d for d in before}
    transitions: dict[str, int] = {}
    listed = []
    for decision in sorted(after, key=lambda d: d.imagename):
        old = earlier.get(decision.imagename)
        if old is None or old.response == decision.response:
            continue
        kinds = (answer_kind(old.shape, old.texture, old.response),
                 answer_kind(decision.shape, decision.texture, decision.response))  # fmt: skip
        key = f"{kinds[0]} -> {kinds[1]}"
        transitions[key] = transitions.get(key, 0) + 1
        listed.append(f"{decision.imagename}: {old.response} -> {decision.response}")
    ordered = dict(sorted(transitions.items(), key=lambda item: (-item[1], item[0])))
    return Flips(len(listed), len(after), allowed, ordered, tuple(listed), budget_entry)


@dataclass
class Verdict:
    """A case's verdict: the data every output carries, and the text rendered from it.

    ``text`` is what a table's Verdict column shows (``PASS [cuda/bf16]``, ``BASELINE (3 flips)``); ``reason`` one
    line on why (empty for a plain pass); ``message`` what a failing case prints in full (the diagnosis and the
    per-category table).
    """

    status: str
    passed: bool
    text: str
    reason: str = ""
    message: str = ""
    #: The expectation entry that decided (``default``, ``cuda/bf16``), where an expectation did.
    expectation: str | None = None
    flips: Flips | None = None
    diagnosis: tuple[Check, ...] = ()
    #: Why the number is withheld although this verdict is not the gate's own (a wrong normalization that breaks a
    #: working model is detected, and its number is still no result); empty when it is shown.
    withholds: str = ""
    #: The report row of the case (a :class:`~modelval.judgement.rows.ReportRow`: the validation runner's; ``None``
    #: elsewhere). Typed loosely: the row holds its verdict, so this module cannot import the row's.
    row: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}; one of {', '.join(STATUSES)}")

    @property
    def withheld(self) -> bool:
        return self.status == "withheld"

    def to_dict(self) -> dict[str, Any]:
        """``passed``, ``status``, ``reason``, ``verdict`` (the text) and, where they exist, the expectation entry,
        the flips and the diagnosis: what every JSON output carries per case."""
        payload: dict[str, Any] = {"passed": self.passed, "status": self.status, "reason": self.reason,
                                   "verdict": self.text}  # fmt: skip
        if self.expectation is not None:
            payload["expectation"] = self.expectation
        if self.flips is not None:
            payload["flips"] = self.flips.to_dict()
        if self.diagnosis:
            payload["diagnosis"] = [check.to_dict() for check in self.diagnosis]
        if self.withholds:
            payload["withholds"] = self.withholds
        return payload


def error_verdict(message: str) -> Verdict:
    """The verdict of a case whose model could not be loaded or run.

    Parameters
    ----------
    message
        The one-line reason.
    """
    return Verdict("error", False, "ERROR", reason=message, message=message)
