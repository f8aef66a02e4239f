"""The benchmark table as text: Markdown to read and CSV to load, as model-vs-human prints its tables.

The Markdown gives the aggregate over the datasets per observer (ranked; with the intervals and rank intervals
when the table has them), the humans' row, the observers' metadata, the pairs of observers the data tell apart,
and every dataset's values; the CSV one row per observer and dataset plus an ``all`` row per observer.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

from modelval.behaviour.benchmark import (
    METADATA_FIELDS,
    METRICS,
    BenchmarkTable,
    BrainScore,
    TableUncertainty,
    brain_score,
    kept_conditions,
)
from modelval.csvio import csv_writer


def benchmark_markdown(table: BenchmarkTable) -> str:
    """The table in Markdown (see the module docstring).

    Parameters
    ----------
    table
        The benchmark (:func:`~modelval.behaviour.benchmark.benchmark_table`).
    """
    ranks, unranked = table.ranks(), table.unranked()
    band = table.uncertainty
    head = [
        "observer",
        "OOD accuracy ↑",
        "rank ↓",
        "accuracy difference ↓",
        "observed consistency ↑",
        "error consistency ↑",
        "mean rank ↓",
    ] + ["Brain-Score ceiled ↑"] * table.with_brain_score
    lines = [f"model-vs-human benchmark over {len(table.datasets)} dataset(s): {', '.join(table.datasets)}"]
    lines.append(f"degenerate kappa: {table.degenerate_kappa} ({table.degenerate_summary()['cells']} cell(s))")
    if band is not None:
        lines.append(
            f"intervals: 95% {band.n_bootstrap}-resample bootstrap (trials within each condition, h - 1 of each "
            "panel's h human observers); ranks [2.5%, 97.5%] over the resamples"
            if band.n_bootstrap
            else "no intervals (--bootstrap 0)"
        )
        lines += _short_lines(band)
    lines += [f"conditions: {table.conditions_rule()}; 'na' answers: {table.na_handling}", "", *_header(head)]
    order = sorted(table.observers, key=lambda label: _order_key(ranks.get(label, {}).get("mean_rank", math.nan)))
    aggregates = {label: table.aggregate(label) for label in order}
    for label in order:
        rank = ranks.get(label, {})
        brain = [_f(table.brain_score_mean(label))] if table.with_brain_score else []
        lines.append(_row([label, *_aggregate_cells(band, label, aggregates[label], rank), *brain]))
    humans = _aggregate_cells(band, "humans", table.human_aggregate(), None)
    lines.append(_row(["humans (each pair of observers; not ranked)", *humans] + [""] * table.with_brain_score))
    if unranked:
        lines += ["", *(f"not ranked: {label}: {reason}" for label, reason in unranked.items())]
    if table.metadata:
        lines += ["", *_metadata_lines(table, order)]
    if band is not None and band.rank_intervals:
        lines += [
            "",
            "ranks with their 95% intervals over the resamples:",
            "",
            *_header(["observer", *(f"rank {m.replace('_', ' ')}" for m in METRICS), "mean rank"]),
        ]
        for label in (label for label in order if label in band.rank_intervals):
            rank = ranks.get(label, {})
            lines.append(_row([label, *(_ranked(band, label, m, rank.get(m)) for m in [*METRICS, "mean_rank"])]))
    if band is not None and band.pairs:
        apart = [t for t in band.pairs if t.distinguishable]
        lines += [
            "",
            f"distinguishable pairs (paired sign-flip test, {band.permutations} flips, Holm over the pairs "
            f"of each measure, p < 0.05): {len(apart)} of {len(band.pairs)}",
        ]
        lines += [
            f"- {t.a} vs {t.b}, {t.measure.replace('_', ' ')}: {t.difference:+.4f}, "
            f"{_format_p(t.p, t.permutations)}, Holm p {'≤ ' if t.p_holm_is_bound else ''}{t.p_holm:.2g}"
            for t in apart
        ]
    return "\n".join([*lines, "", *_dataset_lines(table)])


def _order_key(mean_rank: float) -> float:
    """Ranked observers first, by mean rank; the unranked (NaN) last (a NaN key would leave them anywhere)."""
    return math.inf if math.isnan(mean_rank) else mean_rank


def _short_lines(band: TableUncertainty) -> list[str]:
    """The intervals made from fewer resamples than asked for, so "N resamples" is never silently fewer."""
    short = band.short()
    found = [
        f"{label} {where} {m.replace('_', ' ')}: {n} of {band.n_bootstrap}"
        for label, per in short.items()
        for where, counts in per.items()
        for m, n in counts.items()
    ]
    if not found:
        return [f"resamples used: all {band.n_bootstrap} for every interval"]
    return [
        f"resamples used (the value undefined in the others): {'; '.join(found[:8])}"
        + (f"; and {len(found) - 8} more (JSON: uncertainty.resamples_used)" if len(found) > 8 else "")
    ]


def _aggregate_cells(
    band: TableUncertainty | None, label: str, values: dict[str, float], rank: dict[str, float] | None
) -> list[str]:
    """An observer's aggregate in the Markdown's first table (its ranks; the humans have none)."""

    def value(metric: str, digits: int = 3) -> str:
        found = band.intervals.get(label, {}).get("aggregate", {}).get(metric) if band else None
        return _f(values[metric], digits) + (f" [{_f(found[0], digits)}, {_f(found[1], digits)}]" if found else "")

    ood, rank_ood, mean_rank = value("ood_accuracy"), "", ""
    if rank is not None:
        rank_ood = _ranked(band, label, "ood_accuracy", rank.get("ood_accuracy"))
        mean_rank = _ranked(band, label, "mean_rank", rank.get("mean_rank"))
    consistency = [value("observed_consistency"), value("error_consistency")]
    return [ood, rank_ood, value("accuracy_difference", 4), *consistency, mean_rank]


def _ranked(band: TableUncertainty | None, label: str, metric: str, rank: float | None) -> str:
    found = band.rank_intervals.get(label, {}).get(metric) if band else None
    return _r(rank) + (f" [{_r(found[0])}, {_r(found[1])}]" if found and rank is not None else "")


def _metadata_lines(table: BenchmarkTable, order: Sequence[str]) -> list[str]:
    """The observers' scale beside their results: parameters, training images, data and kind, and the source."""
    lines = [
        "model metadata:",
        "",
        *_header(["observer", "parameters", "training images", "training data", "kind", "source"]),
    ]
    for label in order:
        found = table.metadata.get(label)
        if found is not None:
            lines.append(
                _row(
                    [
                        label,
                        _count(found.parameters),
                        _count(found.training_images),
                        found.training_data or "n/a",
                        found.training_kind or "n/a",
                        found.source,
                    ]
                )
            )
    return lines


def _dataset_lines(table: BenchmarkTable) -> list[str]:
    """Every dataset's values: each observer's and the humans'."""
    brain = table.with_brain_score
    lines = _header(
        [
            "dataset",
            "conditions",
            "observer",
            "OOD accuracy",
            "accuracy difference",
            "observed consistency",
            "error consistency",
        ]
        + (["Brain-Score ceiled"] if brain else [])
    )
    for dataset in table.datasets:
        conditions = ", ".join(kept_conditions(dataset, table.all_conditions))
        rows = [(label, per[dataset]) for label, per in table.observers.items() if dataset in per]
        for label, scores in [*rows, ("humans", table.humans[dataset])]:
            cells = [
                dataset,
                conditions,
                label,
                _f(scores.ood_accuracy),
                _f(scores.accuracy_difference, 4),
                _f(scores.observed_consistency),
                _f(scores.error_consistency),
            ]
            if brain:
                cells.append("" if label == "humans" else _f(brain_score(scores, table.humans[dataset]).ceiled))
            lines.append(_row(cells))
    return lines


def benchmark_csv(table: BenchmarkTable) -> str:
    """The table as CSV: one row per observer and dataset, and an ``all`` row per observer (its aggregate and ranks).

    Parameters
    ----------
    table
        The benchmark (:func:`~modelval.behaviour.benchmark.benchmark_table`).
    """
    ranks, band, described = table.ranks(), table.uncertainty, bool(table.metadata)
    columns = ["observer", "dataset", "conditions", "n_trials", *METRICS, *(f"rank_{m}" for m in METRICS), "mean_rank"]
    if table.with_brain_score:
        columns += ["brain_score_raw", "brain_score_ceiling", "brain_score_ceiled"]
    if described:
        columns += list(METADATA_FIELDS)
    if band is not None:
        columns += [f"{m}_ci95_{end}" for m in METRICS for end in ("low", "high")]
        columns += [f"rank_{m}_ci95_{end}" for m in [*METRICS, "mean_rank"] for end in ("low", "high")]

    def bounds(label: str, where: str) -> list[object]:
        if band is None:
            return []
        found = band.intervals.get(label, {}).get(where, {})
        cells: list[object] = [_c(found[m][k]) if m in found else "" for m in METRICS for k in (0, 1)]
        rank = band.rank_intervals.get(label, {}) if where == "aggregate" else {}
        return cells + [_c(rank[m][k]) if m in rank else "" for m in [*METRICS, "mean_rank"] for k in (0, 1)]

    def described_cells(label: str) -> list[object]:
        found = table.metadata.get(label)
        return [found.value(name) or "" if found else "" for name in METADATA_FIELDS] if described else []

    buffer = io.StringIO()
    writer = csv_writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for label, per in [*table.observers.items(), ("humans", table.humans)]:
        for dataset in (d for d in table.datasets if d in per):
            scores = per[dataset]
            row: list[object] = [
                label,
                dataset,
                ";".join(scores.conditions),
                scores.n_trials,
                *(_c(scores.value(m)) for m in METRICS),
                *[""] * (len(METRICS) + 1),
            ]
            if table.with_brain_score:
                row += _brain_cells(None if label == "humans" else brain_score(scores, table.humans[dataset]))
            writer.writerow(row + described_cells(label) + bounds(label, dataset))
        aggregate = table.human_aggregate() if label == "humans" else table.aggregate(label)
        rank = ranks.get(label, {})
        row = [
            label,
            "all",
            "",
            sum(s.n_trials for s in per.values()),
            *(_c(aggregate[m]) for m in METRICS),
            *(_c(rank.get(m, math.nan)) for m in [*METRICS, "mean_rank"]),
        ]
        if table.with_brain_score:
            row += ["", "", "" if label == "humans" else _c(table.brain_score_mean(label))]
        writer.writerow(row + described_cells(label) + bounds(label, "aggregate"))
    return buffer.getvalue()


def _format_p(p: float, permutations: int) -> str:
    """A Monte Carlo p-value; at the floor of N random flips, ``p < 2/(N+1)`` (the test cannot say less).

    Parameters
    ----------
    p
        The p-value.
    permutations
        The random sign flips it is from (0: an exact p-value).
    """
    if math.isnan(p):
        return "p n/a"
    floor = 2 / (permutations + 1) if permutations else 0.0
    if permutations and p <= floor * (1 + 1e-9):
        return f"p < 2/({permutations}+1) = {floor:.1e}"
    return f"p = {p:.2g}" if p >= 0.001 else f"p = {p:.1e}"


def _brain_cells(score: BrainScore | None) -> list[object]:
    return ["", "", ""] if score is None else [_c(score.raw), _c(score.ceiling), _c(score.ceiled)]


def _header(head: Sequence[str]) -> list[str]:
    return [_row(head), _row(["---"] * len(head))]


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _f(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _r(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.3g}"


def _count(value: int | None) -> str:
    """1281167 -> '1.28 M', 2320000000 -> '2.32 B'; None -> 'n/a'."""
    if value is None:
        return "n/a"
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:.3g} {unit}"
    return str(value)


def _c(value: float) -> str:
    return "" if math.isnan(value) else repr(float(value))
