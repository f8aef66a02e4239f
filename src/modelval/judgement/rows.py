"""Report rows and their tables: one :class:`ReportRow` per evaluated (model, source, normalization).

The same rows feed the CLI table, the pytest terminal summary and the files written by ``--report-dir``
(:mod:`modelval.runner.reports`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from modelval import jsonio
from modelval.behaviour.shape_bias import ShapeBiasResult
from modelval.errors import ModelvalError
from modelval.judgement.expected import ExpectedShapeBias
from modelval.judgement.sanity import VERDICT as SANITY_VERDICT
from modelval.judgement.verdict import Verdict, error_verdict

if TYPE_CHECKING:
    from modelval.judgement.committed import CommittedBaseline

#: What the Expected column says for a registered model of which no shape bias is published.
NO_PUBLISHED_VALUE = "no published value"


class ShapeBiasWithheld(ModelvalError):
    """A shape bias was read that the sanity gate withholds: the model is not a working classifier (under this
    normalization, or under its own), so the number means nothing.

    Raised wherever a withheld shape bias is read from Python (``report.shape_bias``, ``row.shape_bias``), so
    a NaN never slips into a table; the raw computation stays readable as ``.result.shape_bias`` for a caller
    who wants it anyway (or pass ``sanity_gate=False``).
    """


@dataclass
class ReportRow:
    """One evaluated (model, source, normalization) case: its result, what was expected and the verdict.

    A row whose number the sanity gate withholds says why (:attr:`withheld`) and shows the number nowhere
    (tables, JSON, CSV, the run store, plots); a row of a model that could not be loaded or run carries the
    one-line :attr:`error` and the verdict ``ERROR``.
    """

    model: str
    label: str
    source: str
    normalization: str
    result: ShapeBiasResult
    expected: ExpectedShapeBias | None = None
    #: The judge's verdict (:func:`modelval.judgement.verdicts.judge`); ``None``: not judged (``n/a``).
    verdict: Verdict | None = None
    note: str = ""
    #: What produced the row (modelval.records.provenance; docs/provenance.md); empty when unknown.
    provenance: dict[str, object] = field(default_factory=dict)
    #: The row's id in the run store, when it was recorded.
    run_id: int | None = None
    #: Categories the model's head has no output for (a label map): their shape bias is undefined.
    unmapped: tuple[str, ...] = ()
    #: The one-line reason a model could not be loaded or run (verdict ``ERROR``; no result).
    error: str | None = None
    #: The class of that error, by its type (:func:`modelval.errors.failure_class`).
    error_class: str | None = None
    #: Where no shape bias is published: the model's committed baseline, compared when the protocol is its own.
    baseline: CommittedBaseline | None = None
    #: The normalization the case asked for (``model``, ``imagenet``, ...), as data, where :attr:`normalization`
    #: shows it with what it resolved to (``model (half)``); not given: the same as :attr:`normalization`.
    normalization_case: str = ""

    def __post_init__(self) -> None:
        self.normalization_case = self.normalization_case or self.normalization

    @classmethod
    def for_error(
        cls, model: str, label: str, source: str, normalization: str, error: str, error_class: str = "error"
    ) -> ReportRow:
        """The row of a case whose model could not be loaded or run: the verdict ``ERROR`` and its reason.

        Parameters
        ----------
        model
            The model's name.
        label
            Its display label.
        source
            Where it was loaded from.
        normalization
            The normalization the case asked for.
        error
            The one-line error.
        error_class
            Its class (:func:`modelval.errors.failure_class`).
        """
        from modelval.behaviour.shape_bias import compute_shape_bias

        empty = compute_shape_bias([], n_bootstrap=0)
        return cls(model, label, source, normalization, empty, verdict=error_verdict(error), error=error,
                   error_class=error_class)  # fmt: skip

    @property
    def withheld(self) -> str | None:
        """Why no shape bias is shown (the model is not a working classifier, or could not run), or ``None``."""
        if self.error is not None:
            return f"error: {self.error}"
        if self.final_verdict.withholds:
            return f"withheld: {self.final_verdict.withholds}"
        if self.final_verdict.withheld:
            return f"withheld: {SANITY_VERDICT} (cue-conflict accuracy below the sanity gate)"
        return None

    @property
    def shape_bias(self) -> float:
        """The shape bias; reading a withheld one raises :class:`ShapeBiasWithheld` with the reason."""
        if self.withheld:
            raise ShapeBiasWithheld(f"{self.label} ({self.normalization}): no shape bias, {self.withheld}")
        return self.result.shape_bias

    @property
    def difference(self) -> float | None:
        if self.expected is None or self.expected.value is None or self.withheld:
            return None
        return self.result.shape_bias - self.expected.value

    @property
    def unpublished(self) -> bool:
        """A registered model of which no shape bias is published (its Expected column says so)."""
        return self.expected is not None and self.expected.value is None

    @property
    def compared_baseline(self) -> CommittedBaseline | None:
        """The committed baseline this row was compared with (``None`` when there is none or it does not apply)."""
        verdict = self.final_verdict
        if self.baseline is None or not self.baseline.applies or self.error or verdict.withholds or verdict.withheld:
            return None
        return self.baseline

    @property
    def baseline_difference(self) -> float | None:
        """This row's shape bias minus its committed baseline's, where that baseline applies."""
        baseline = self.compared_baseline
        if baseline is None or baseline.shape_bias is None:
            return None
        return self.result.shape_bias - baseline.shape_bias

    def why_no_expected(self) -> str | None:
        """One line on an ``n/a`` Expected value: nothing published, and what the row was compared with instead."""
        if not self.unpublished or self.error is not None:
            return None
        text = f"{self.label}: {NO_PUBLISHED_VALUE} of its shape bias"
        if self.baseline is not None:
            return f"{text}; {self.baseline.describe()}"
        if self.expected is not None and self.expected.baseline:
            baseline = self.expected.baseline
            # a models file's baseline is the user's own path; a registry entry's is the package's data
            where = baseline if Path(baseline).is_absolute() else f"src/modelval/data/{baseline}"
            kind = "its baseline" if Path(baseline).is_absolute() else "its committed baseline"
            return f"{text}; {kind} is {where}"
        return text

    @property
    def final_verdict(self) -> Verdict:
        """The row's verdict (``n/a`` when it was not judged)."""
        return self.verdict if self.verdict is not None else NOT_JUDGED

    def to_dict(self) -> dict[str, object]:
        result = self.result.to_dict()
        per_category = result["per_category"]
        assert isinstance(per_category, dict)
        for name in self.unmapped:
            per_category[name]["shape_bias"] = jsonio.Undefined(UNMAPPED_REASON.format(category=name))
        difference: object = self.difference
        expected: object = None if self.expected is None else self.expected.value
        if self.unpublished:
            expected = difference = jsonio.Undefined(self.why_no_expected() or NO_PUBLISHED_VALUE)
        if self.withheld:
            withheld = jsonio.Undefined(self.withheld)
            result["shape_bias"] = withheld
            result["ci95"] = [withheld, withheld]
            for values in per_category.values():
                values["shape_bias"] = withheld
            difference = withheld
        if self.error is not None:  # nothing was measured: no counts either
            nothing = jsonio.Undefined(self.withheld or "")
            for key in ("shape_hits", "texture_hits", "other", "conflict_images", "cue_accuracy"):
                if key in result:
                    result[key] = nothing
            result["per_category"] = {}
        return {
            "model": self.model,
            "label": self.label,
            "source": self.source,
            "normalization": self.normalization,
            "normalization_case": self.normalization_case,
            **result,
            "expected": expected,
            "tolerance": None if self.expected is None else self.expected.tolerance,
            "expected_source": None if self.expected is None else self.expected.source,
            "difference": difference,
            **self.final_verdict.to_dict(),
            "note": self.note,
            **({"error": self.error, "error_class": self.error_class} if self.error is not None else {}),
            **({"baseline": self._baseline_dict()} if self.baseline is not None and self.error is None else {}),
            **({"provenance": self.provenance} if self.provenance else {}),
        }

    def _baseline_dict(self) -> dict[str, object]:
        assert self.baseline is not None
        found = self.baseline.to_dict()
        if self.baseline.applies:
            found["difference"] = jsonio.Undefined(self.withheld) if self.withheld else self.baseline_difference
        return found

    def summary(self) -> dict[str, object]:
        """The row's headline numbers as the run store keeps them: withheld ones are null with their reason."""
        payload = self.to_dict()
        keys = ("label", "shape_bias", "ci95", "cue_accuracy", "conflict_images", "shape_hits", "texture_hits", "other",
                "expected", "tolerance", "expected_source", "difference", "passed", "status", "reason", "verdict",
                "flips", "error", "error_class", "per_category")  # fmt: skip
        return {key: payload[key] for key in keys if key in payload}


#: The verdict of a case whose model could not be loaded or run (its error is the message).
ERROR_VERDICT = "ERROR"
#: The verdict of a row nobody judged.
NOT_JUDGED = Verdict("n/a", True, "n/a")


UNMAPPED_REASON = "unmapped: the label map gives the model no output for {category}, so it can never answer it"


def _pct(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value * 100:.2f}%"


def signed_pp(value: float | None, digits: int = 2) -> str:
    """A difference of two percentages, in percentage points: ``+0.68 pp`` (never ``-0.00``).

    Parameters
    ----------
    value
        A difference of two fractions (``None``: none, shown as ``n/a``).
    digits
        Decimal places.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    text = f"{value * 100:+.{digits}f}"
    if float(text) == 0:
        text = f"{0:.{digits}f}"  # a difference that rounds to zero has no sign
    return f"{text} pp"


WITHHELD = "withheld"


COMPARISON_COLUMNS = ("Model", "Source", "Normalization", "Shape bias", "Expected", "Difference", "Verdict")
# The interval is the shape bias's, not the cue accuracy's beside it: the header says whose.
BREAKDOWN_COLUMNS = (
    "Model", "Normalization", "Shape hits", "Texture hits", "Other", "Conflicts", "Cue acc.", "Shape bias 95% CI"
)  # fmt: skip


def _comparison_cells(row: ReportRow) -> list[str]:
    shown = "error" if row.error is not None else WITHHELD
    expected, difference = _pct(row.expected.value if row.expected else None), signed_pp(row.difference)
    baseline = row.compared_baseline
    if baseline is not None:  # nothing published: the committed baseline of the same protocol stands in
        expected, difference = f"{_pct(baseline.shape_bias)} (baseline)", signed_pp(row.baseline_difference)
    elif row.unpublished:
        expected = NO_PUBLISHED_VALUE
    return [
        row.label,
        row.source,
        row.normalization,
        shown if row.withheld else _pct(row.result.shape_bias),
        expected,
        shown if row.withheld else difference,
        f"{ERROR_VERDICT}: {row.error}" if row.error is not None else row.final_verdict.text,
    ]


def _breakdown_cells(row: ReportRow) -> list[str]:
    r = row.result
    if row.error is not None:  # nothing was measured
        return [row.label, row.normalization, *["-"] * (len(BREAKDOWN_COLUMNS) - 3), "error"]
    # the interval names what its bootstrap resampled (texture images by default)
    interval = WITHHELD if row.withheld else f"[{_pct(r.ci_low)}, {_pct(r.ci_high)}] {r.ci_resampling}"
    return [
        row.label,
        row.normalization,
        str(r.shape_hits),
        str(r.texture_hits),
        str(r.other),
        str(r.conflict_images),
        _pct(r.cue_accuracy),
        interval,
    ]


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    rule = "-" * len(line)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([line, rule, *body])


def format_comparison(rows: Sequence[ReportRow]) -> str:
    """The "Model | Source | Normalization | Shape bias | Expected | Difference | Verdict" table.

    Parameters
    ----------
    rows
        The report rows.
    """
    return _text_table(COMPARISON_COLUMNS, [_comparison_cells(r) for r in rows])


def format_breakdown(rows: Sequence[ReportRow]) -> str:
    """The per-case breakdown table: hits, conflicts, cue-conflict accuracy and the interval.

    Parameters
    ----------
    rows
        The report rows.
    """
    return _text_table(BREAKDOWN_COLUMNS, [_breakdown_cells(r) for r in rows])


def format_per_category(result: ShapeBiasResult, *, unmapped: Sequence[str] = (), withheld: bool = False) -> str:
    """Hits per shape category and their shape bias (``unmapped`` categories: the head cannot answer them;
    ``withheld``: the model is not a working classifier, so no shape bias is shown).

    Parameters
    ----------
    result
        The shape-bias result.
    unmapped
        Categories the head has no output for.
    withheld
        The sanity gate withholds the shape bias.
    """
    header = ("Category", "Shape hits", "Texture hits", "Other", "Shape bias")

    def value(category: str, bias: float) -> str:
        if withheld:
            return WITHHELD
        return "unmapped" if category in unmapped else _pct(bias)

    rows = [
        [c, str(v.shape_hits), str(v.texture_hits), str(v.other), value(c, v.shape_bias)]
        for c, v in result.per_category.items()
    ]
    return _text_table(header, rows)


def format_report(rows: Sequence[ReportRow], *, per_category: bool = True) -> str:
    """The full human-readable report: comparison, breakdown, and per-category detail.

    Parameters
    ----------
    rows
        The report rows.
    per_category
        Also each row's per-category detail.
    """
    parts = ["SHAPE BIAS COMPARISON", format_comparison(rows), "", "DETAILED BREAKDOWN", format_breakdown(rows)]
    if per_category:
        for row in rows:
            if row.error is not None:
                continue
            table = format_per_category(row.result, unmapped=row.unmapped, withheld=bool(row.withheld))
            parts += ["", f"Per shape category: {row.label} ({row.normalization})", table]
    sources = {r.expected.source for r in rows if r.expected and r.expected.value is not None}
    if sources:
        parts += ["", "Expected values: " + "; ".join(sorted(sources))]
    parts += _unpublished_notes(rows, blank=not sources)
    return "\n".join(parts)


def _unpublished_notes(rows: Sequence[ReportRow], *, blank: bool = True) -> list[str]:
    """One line per row whose Expected value is missing: nothing is published, and what it was compared with."""
    notes = list(dict.fromkeys(note for row in rows if (note := row.why_no_expected())))
    return ([""] if notes and blank else []) + notes


def format_comparison_notes(rows: Sequence[ReportRow]) -> str:
    """The lines under a comparison table that explain its ``no published value`` entries ("" when none).

    Parameters
    ----------
    rows
        The report rows.
    """
    return "\n".join(_unpublished_notes(rows, blank=False))


def format_markdown(rows: Sequence[ReportRow]) -> str:
    """The report as Markdown: the comparison table, then the breakdown.

    Parameters
    ----------
    rows
        The report rows.
    """
    def md(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])

    return (
        "\n\n".join(
            [
                "# Shape-bias validation report",
                md(COMPARISON_COLUMNS, [_comparison_cells(r) for r in rows]),
                "## Breakdown",
                md(BREAKDOWN_COLUMNS, [_breakdown_cells(r) for r in rows]),
            ]
        )
        + "\n"
    )
