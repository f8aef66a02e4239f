"""``modelval shape-bias``: evaluate a registered model, or recompute from a decision CSV."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from modelval.behaviour.answers import PARSERS, PROMPTS
from modelval.cli._args import add_figure_option, add_json_option, add_report_dir_option, output_file
from modelval.cli._options import (
    ONE_MODEL,
    STATISTICS,
    UNFLAGGED,
    add_model_argument,
    add_settings,
    evaluation_options,
    model_options,
)
from modelval.cli._output import out, out_json, warn
from modelval.judgement.sanity import SANITY_THRESHOLD
from modelval.judgement.sanity import VERDICT as SANITY_VERDICT
from modelval.records.run_store import default_run_store


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval shape-bias`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "shape-bias",
        help="cue-conflict shape bias of a model, a decision CSV, a VLM or saved outputs",
        description=(
            "Shape bias (Geirhos et al., ICLR 2019): shape hits / (shape + texture hits) over the 1200 "
            "cue-conflict images. Evaluate --model on the stimuli, recompute from --decisions, ask a --vlm, or "
            "re-score saved --outputs. Exit status 1 when the model is not a working classifier (the sanity gate)."
        ),
    )
    observer = parser.add_argument_group("the observer: one of --model, --decisions, --vlm, --outputs")
    add_model_argument(observer)
    observer.add_argument(
        "--decisions",
        type=Path,
        help="per-image decision CSV (published raw-data format), or a published VLM/CLIP response file "
        "(image, response, pred_label, ...), read by pred_label unless --parse",
    )
    observer.add_argument(
        "--parse",
        choices=PARSERS,
        help="re-parse a response file's answers: vqa (the option letter or a bare category name, the authors' "
        "rule), caption-judge (an LLM judge's letters; several or X: no class), caption-names (a caption's words)",
    )
    observer.add_argument(
        "--vlm",
        metavar="FILE.py:FN",
        help="a vision-language model of your own: a callable (PIL image, prompt) -> str, asked each --prompt",
    )
    observer.add_argument(
        "--prompt",
        action="append",
        metavar="NAME|FILE",
        help=f"with --vlm, repeatable (a prompt sweep): {', '.join(PROMPTS)} or a prompt file (default: vqa16)",
    )
    observer.add_argument(
        "--outputs",
        type=Path,
        metavar="DIR",
        help="saved outputs (--save-outputs DIR): the shape bias recomputed without the model, with the code that "
        "scores a fresh run, under another --aggregation, --label-map or --categories (default: the saved run's), "
        "with REFINED-BIAS's shape and texture mean reciprocal ranks",
    )
    observer.add_argument(
        "--categories", help="with --outputs: a comma-separated subset of the 16 categories (decisions among them)"
    )
    add_settings(parser, *ONE_MODEL, "amp", *STATISTICS, quiet=UNFLAGGED)
    results = parser.add_argument_group("results")
    results.add_argument(
        "--decisions-out", type=output_file, metavar="FILE", help="write per-image decisions (raw-data CSV format)"
    )
    results.add_argument(
        "--save-outputs",
        type=Path,
        metavar="DIR",
        help="write the model's raw outputs with their provenance, for `modelval shape-bias --outputs DIR`",
    )
    add_figure_option(results, "the per-category shape-bias figure")
    add_report_dir_option(results, "shape_bias.json, decisions.csv and the per-category figure (PNG and PDF)")
    add_json_option(results)
    results.add_argument(
        "--no-sanity-gate",
        action="store_true",
        help=f"report the shape bias even when the cue-conflict accuracy is below {SANITY_THRESHOLD * 100:.0f}%% (a "
        "model that is not a working classifier); the gate otherwise withholds it, deciding from a random "
        "sample of the stimuli when that is already certain. Also skips the preprocessing self-check (the declared "
        "preprocessing against BGR, the other normalizations and [0, 255] inputs; docs/regression.md)",
    )
    # --model alone evaluates; with --decisions it only names the observer (for its expected value).
    parser.set_defaults(handler=_run, _parser=parser)


def _run(args: argparse.Namespace) -> int:
    from modelval import api

    if args.outputs is not None:
        return _run_outputs(args)
    if args.categories:
        args._parser.error("--categories re-scores saved --outputs")
    if args.vlm is not None:
        return _run_vlm(args)
    if args.prompt:
        args._parser.error("--prompt is for --vlm (a vision-language model of your own)")
    if args.parse is not None and args.decisions is None:
        args._parser.error("--parse re-reads a response file given as --decisions; a model's decisions are classes")
    if args.decisions is None and not args.model:
        args._parser.error("one of --model, --decisions, --vlm or --outputs is required")
    if args.decisions is not None and args.decisions_out is not None:
        args._parser.error("--decisions-out writes a model's decisions; it needs --model without --decisions")
    if args.decisions is not None and args.save_outputs is not None:
        args._parser.error("--save-outputs needs --model without --decisions (a decision file has no outputs)")
    if args.decisions is not None:
        report = api.shape_bias_of_decisions(
            args.decisions,
            observer=args.model,
            bootstrap=args.bootstrap,
            seed=args.seed,
            sanity_gate=not args.no_sanity_gate,
            resample=args.resample,
            parse=args.parse,
        )
        warning = report.details.pop("coverage_warning", None)
        if warning:
            warn(warning)
    else:
        report = api.shape_bias(
            args.model,
            options=evaluation_options(args),
            model_options=model_options(args),
            sanity_gate=not args.no_sanity_gate,
            # Decisions asked for are all decisions: a random sample would not do.
            early_gate=args.decisions_out is None and args.report_dir is None,
            run_store=default_run_store(),
        )
        if args.save_outputs is not None and report.run is not None:
            from modelval.api.saved_outputs import save_outputs

            save_outputs(report.run, args.save_outputs)
            warn(f"outputs saved to {args.save_outputs} (`modelval shape-bias --outputs {args.save_outputs}`)")
    written = _write_outputs(args, report)
    if written:
        report.details["written"] = [str(path) for path in written]
    if args.json:
        out_json(report.to_json())
    else:
        out(_format_text(report))
    if report.gate_failed:
        # The text output above already holds the whole message: stderr gets the verdict once, in short.
        text = report.sanity.message() if args.json else f"{report.sanity.headline()} (the likely causes are above)"
        print(f"modelval: {text}", file=sys.stderr)
        return 1
    verdict = report.row.final_verdict
    if report.gated and verdict.status == "suspect":  # a failed check: the verdict's reason, once, in one line
        print(f"modelval: SUSPECT PREPROCESSING: {verdict.reason}", file=sys.stderr)
        return 1
    return 0


def _run_outputs(args: argparse.Namespace) -> int:
    """``--outputs DIR``: the shape bias of saved outputs under another aggregation, label map or categories, and
    REFINED-BIAS's mean reciprocal ranks (always: they cost a few milliseconds)."""
    from modelval.api.saved_outputs import rescore

    for flag, given in (("--model", args.model), ("--decisions", args.decisions), ("--vlm", args.vlm),
                        ("--save-outputs", args.save_outputs), ("--decisions-out", args.decisions_out)):  # fmt: skip
        if given:
            args._parser.error(f"--outputs re-scores saved outputs without the model; {flag} does not apply to it")
    categories = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
    report = rescore(
        args.outputs, aggregation=args._given.get("aggregation"), label_map=args.label_map, categories=categories,
        bootstrap=args.bootstrap, seed=args.seed, resample=args.resample, ranks=True,
        run_store=default_run_store(),
    )  # fmt: skip
    if args.json:
        out_json(report.to_json())
        return 0
    result = report.result
    low, high = result.ci_low * 100, result.ci_high * 100
    interval = f"[{low:.2f}, {high:.2f}] ({result.ci_resampling} resampled)" if math.isfinite(low) else "(no interval)"
    out(f"{report.model} (saved outputs, {report.aggregation} aggregation, label map: {report.label_map})")
    out(
        f"shape bias {result.shape_bias * 100:.2f}% {interval}; "
        f"shape {result.shape_hits} / texture {result.texture_hits} / other {result.other} of "
        f"{result.conflict_images} conflicts"
    )
    if len(report.categories) < 16:
        out("categories: " + ", ".join(report.categories))
    if report.ranks is not None:
        ranks = report.ranks
        out(
            f"REFINED-BIAS ranks over all outputs: shape MRR {ranks.shape_mrr:.4f}, "
            f"texture MRR {ranks.texture_mrr:.4f} ({ranks.images} conflict images)"
        )
    return 0


def _run_vlm(args: argparse.Namespace) -> int:
    """``--vlm FILE.py:FN [--prompt ...]``: each prompt's shape bias, accuracy and abstentions, paired differences."""
    from modelval import api

    for flag, value in (
        ("--model", args.model),
        ("--decisions", args.decisions),
        ("--save-outputs", args.save_outputs),
    ):
        if value:
            args._parser.error(f"--vlm asks a vision-language model; {flag} does not apply to it")
    report = api.vlm_shape_bias(
        args.vlm,
        args.prompt or ["vqa16"],
        parse=args.parse,
        options=evaluation_options(args),
        run_store=default_run_store(),
    )
    if args.decisions_out is not None:
        from modelval.behaviour.decisions import write_decisions

        first = report.prompts[0]
        write_decisions(args.decisions_out, first.decisions, subject=f"{report.vlm} {first.name}")
        warn(f"decisions of the prompt {first.name} written to {args.decisions_out}")
    if args.json:
        out_json(report.to_json())
    else:
        out(report.table())
    return 0


def _write_outputs(args: argparse.Namespace, report) -> list[Path]:
    """``--decisions-out``, ``--out`` and ``--report-dir``; no figure of a shape bias the gate withholds."""
    from modelval.atomic import write_text
    from modelval.behaviour.decisions import write_decisions

    written: list[Path] = []
    if args.decisions_out and args.decisions is None:
        written.append(write_decisions(args.decisions_out, report.decisions, subject=report.row.model))
    # (file, also its .pdf sibling): --out FILE in the format its suffix names, the report folder's PNG and PDF
    figures = [(path, False) for path in (args.out,) if path]
    if args.report_dir:
        if args.decisions is None:
            written.append(
                write_decisions(args.report_dir / "decisions.csv", report.decisions, subject=report.row.model)
            )
        figures.append((args.report_dir / "shape-bias-per-category.png", True))
    if figures and report.gate_failed:
        warn("no shape-bias figure: the model is not a working classifier (--no-sanity-gate draws it anyway)")
    elif figures:
        from modelval.figures.shape_bias import DPI, plot_per_category
        from modelval.figures.style import save

        label = f"{report.row.label} ({report.row.normalization})"
        for path, pdf in figures:
            figure = plot_per_category({label: report.result}, unmapped=report.row.unmapped)
            written += save(figure, path, pdf=pdf, dpi=DPI)
    if args.report_dir:
        json_path = args.report_dir / "shape_bias.json"
        report.details["written"] = [str(path) for path in [*written, json_path]]
        written.append(write_text(json_path, report.to_json() + "\n"))
    return written


def _format_text(report) -> str:
    """The table: the verdict first when the gate withholds the shape bias, the preprocessing and its
    sources, the report row, the run facts, the sanity line."""
    from modelval.judgement.rows import format_report

    lines = []
    if report.gate_failed:
        lines += [report.sanity.message(), ""]
    preprocessing = report.details.get("preprocessing")
    if isinstance(preprocessing, dict):
        lines.append(_format_preprocessing(preprocessing))
    lines.append(format_report([report.row]))
    mapped = report.details.get("mapped_conflicts")
    if isinstance(mapped, dict):
        lines.append(_format_mapped(mapped, report.details.get("unmapped_categories") or [], bool(report.row.withheld)))
    if report.result.abstentions or "abstention_rule" in report.details:
        lines.append(
            f"abstentions: {report.result.abstentions} of the {report.result.conflict_images} conflict stimuli got no "
            f"class; cue-conflict accuracy {report.result.cue_accuracy:.2%} (over all of them)"
        )
    for name, value in report.details.items():
        if name == "audit":
            lines += [f"audit: {note}" for note in value]
        elif name == "written":
            lines += [f"wrote {path}" for path in value]
        elif name == "decode_cache":
            lines.append(f"decode cache: {describe_decode_cache(value, report.details.get('decode_cache_entry'))}")
        elif name == "preprocessing_check":
            lines.append(f"preprocessing check: {describe_check(value)}")
        elif name not in (
            "preprocessing",
            "spec",
            "mapped_conflicts",
            "unmapped_categories",
            "decode_cache_entry",
        ) and (value is not None):
            lines.append(f"{name.replace('_', ' ')}: {value}")
    if report.sanity.passed:
        lines.append(report.sanity.message())
    elif not report.gate_failed:  # --no-sanity-gate: the number is shown, and the reader is told what it is
        lines.append(
            f"sanity: {SANITY_VERDICT} (cue-conflict accuracy {report.sanity.cue_accuracy:.2%} is below "
            f"{report.sanity.threshold:.0%}); the shape bias above is shown only because of --no-sanity-gate"
        )
    return "\n".join(lines)


def describe_check(record: dict) -> str:
    """The self-check's line: its finding, the alternatives it held the declared preprocessing against and its cost.

    Parameters
    ----------
    record
        ``report.details["preprocessing_check"]``.
    """
    if record.get("passed") is None:
        return str(record["reason"])
    tried = ", ".join(f"{a['name']} {a['accuracy']:.1%}" for a in record["alternatives"])
    cost = (f"{record['images_forwarded']} images forwarded, {record['seconds']:.1f} s" if not record.get("stored")
            else "read from beside the stored outputs")  # fmt: skip
    if record["passed"]:
        first = record["alternatives"][0]
        return (f"pass: the declared preprocessing ({record['declared']}) answers at least as well as each "
                f"alternative on the same conflict stimuli ({tried}; declared {first['declared_accuracy']:.1%} on "
                f"the first {first['stimuli']}; {cost})")  # fmt: skip
    return f"{record['reason']} ({cost})"


def describe_decode_cache(status: object, entry: object) -> str:
    """``hit (stored <time> by an earlier run: <path>)`` / ``miss (the PNGs decoded now, stored in <path>)``.

    Parameters
    ----------
    status
        The decode cache's status of the run.
    entry
        Its entry (path, when stored).
    """
    if not isinstance(entry, dict):
        return str(status)
    if status == "hit":
        return (
            f"hit (decoded and stored {entry['stored']} by an earlier run that loaded these stimuli: {entry['path']})"
        )
    return f"{status} (the PNGs decoded now, stored in {entry['path']})"


def _format_mapped(mapped: dict, unmapped: list[str], withheld: bool) -> str:
    """The label map's two numbers side by side: over all conflicts, and over the ones the head can answer."""
    bias, (low, high) = mapped["shape_bias"], mapped["ci95"]
    if withheld:
        value = "withheld"
    elif isinstance(bias, float) and not math.isnan(bias):
        value = f"{bias:.2%} [{low:.2%}, {high:.2%}]"
    else:
        value = "n/a (no shape or texture hits)"
    return (
        f"unmapped categories (the head has no output for them): {', '.join(unmapped)}\n"
        f"shape bias over the {mapped['conflict_images']} conflict stimuli the head can answer (shape and texture "
        f"both mapped): {value}; the overall value above is not comparable with a 16-class shape bias"
    )


def _format_preprocessing(preprocessing: dict) -> str:
    """The resolved preprocessing and where each value came from, as the table's header lines."""
    size = preprocessing.get("input_size") or "as published (224 px)"
    lines = [
        f"preprocessing: mean={tuple(preprocessing['mean'])} std={tuple(preprocessing['std'])} "
        f"interpolation={preprocessing['interpolation']} input size={size}"
    ]
    sources = preprocessing.get("sources") or {}
    grouped: dict[str, list[str]] = {}
    for key, origin in sources.items():
        grouped.setdefault(origin, []).append(key.replace("_", " "))
    lines += [f"  {', '.join(keys)} from {origin}" for origin, keys in grouped.items()]
    if preprocessing.get("native_input_size"):
        lines.append(f"  the source's own input size: {preprocessing['native_input_size']} px")
    return "\n".join(lines)
