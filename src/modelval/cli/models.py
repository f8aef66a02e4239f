"""``modelval models list|fetch|audit``: the registry, weights ahead of time, and the preprocessing audit."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from modelval.cli._args import add_json_option, bounded_int
from modelval.cli._options import add_settings
from modelval.cli._output import out, out_json
from modelval.errors import ModelvalError

if TYPE_CHECKING:
    from modelval.api.audit import AuditReport


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval models`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    group = subparsers.add_parser(
        "models",
        help="list registered models, download their weights, audit each source's preprocessing",
        description="The model registry (docs/models.md): its entries, their weights and their preprocessing.",
        moved={"ACTION": "the registry's list is `modelval models list`"},
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="registered models, their sources and whether weights are here")
    listing.add_argument("--family", help="only this family (resnet50, deit, efficientnet)")
    listing.add_argument("--source", help="only this source (torchvision, torch.hub, huggingface, timm, ...)")
    add_json_option(listing, "the models (a list)")
    add_settings(listing, "checkpoint_dir")
    listing.set_defaults(handler=_run_models)

    fetch = actions.add_parser(
        "fetch",
        help="download model weights ahead of time (verified; replaces corrupt cached files)",
        description="Download what a model needs: checkpoint files into the checkpoint cache (verified against "
        "the SHA-256 prefix in their names), torch.hub code into $TORCH_HOME/hub, HF files into $HF_HOME.",
    )
    fetch.add_argument("names", nargs="*", metavar="NAME", help="registered model names or specs (timm:..., hf:...)")
    fetch.add_argument("--all", action="store_true", help="every registered model")
    fetch.add_argument("--force", action="store_true", help="download again even when cached")
    add_settings(fetch, "trust_repo", "offline", "checkpoint_dir", help={
        "offline": "download nothing: check that the weights are cached and verify them",
    })  # fmt: skip
    fetch.set_defaults(handler=_run_fetch, _parser=fetch)

    audit = actions.add_parser(
        "audit", help="compare each source's preprocessing of a model with its training config on real stimuli"
    )
    audit.add_argument("--model", help="entry (deit_small_hf) or model (deit_small); default: every model")
    audit.add_argument(
        "--images",
        type=bounded_int(1, 1280, "the stimuli compared are 1 to 1280"),
        default=16,
        help="stimuli compared pixel by pixel (default 16)",
    )
    audit.add_argument(
        "--measure",
        action="store_true",
        help="also evaluate the model on all stimuli under each normalization (needs its weights)",
    )
    add_json_option(audit, "the audit")
    add_settings(audit, "data_root", "batch_size", "device", quiet=("checkpoint_dir", "data_home", "offline"))
    audit.set_defaults(handler=_run_audit)


def _run_models(args: argparse.Namespace) -> int:
    from modelval.extras import extra_installed, install_hint
    from modelval.models import list_models, weights_status

    every = list_models()
    for option, value, known in (
        ("--family", args.family, sorted({entry.family for entry in every})),
        ("--source", args.source, sorted({entry.source for entry in every})),
    ):
        if value is not None and value not in known:
            from modelval.errors import InputValidationError

            # was an empty table and exit 0, as if the registry had no such models
            raise InputValidationError(f"{option} {value!r} is not one of the registry's: {', '.join(known)}")
    entries = list_models(family=args.family, source=args.source)
    rows = []
    for entry in entries:
        status = weights_status(entry.name, args.checkpoint_dir)
        extra = entry.required_extra
        rows.append(
            {
                "name": entry.name,
                "family": entry.family,
                "variant": entry.variant,
                "source": entry.source,
                "extra": extra,
                "extra_installed": None if extra is None else extra_installed(extra),
                "weights_present": status.available,
                "weights_url": entry.weights_url,
                "preprocessing": entry.preprocess.describe(),
                "provenance": entry.provenance,
            }
        )
    if args.json:
        out_json(rows)
        return 0
    out(f"{'name':<20} {'source':<17} {'extra':<21} {'weights':<8} weights URL")
    for row in rows:
        present = "present" if row["weights_present"] else "missing"
        extra = "-" if row["extra"] is None else f"{row['extra']} ({'' if row['extra_installed'] else 'not '}installed)"
        out(f"{row['name']:<20} {row['source']:<17} {extra:<21} {present:<8} {row['weights_url']}")
    absent = sorted({row["extra"] for row in rows if row["extra"] is not None and not row["extra_installed"]})
    hint = f"; first {', '.join(map(install_hint, absent))} for the entries that need it" if absent else ""
    out(f"{len(rows)} models. `modelval models fetch NAME` downloads missing weights{hint}.")
    return 0


def _run_fetch(args: argparse.Namespace) -> int:
    from modelval.models import entry_for_spec, fetch_weights, list_models

    if not args.all and not args.names:
        args._parser.error("name one or more models, or pass --all")
    entries = list_models() if args.all else [entry_for_spec(n, trust_repo=args.trust_repo) for n in args.names]
    names = [e.name for e in entries]
    failures = []
    for name, entry in zip(names, entries, strict=True):
        try:
            paths = fetch_weights(
                entry, args.checkpoint_dir, force=args.force, progress=sys.stderr.isatty(), offline=args.offline
            )
        except ModelvalError as error:
            if len(names) == 1:  # one model: its error is the one line
                raise
            failures.append(f"{name}: {error}")
            print(f"FAILED  {name}", file=sys.stderr)
            continue
        out(f"ok      {name}: " + (", ".join(map(str, paths)) or "bundled with its package"))
    if failures:
        raise ModelvalError(f"{len(failures)} of {len(names)} downloads failed: " + "; ".join(failures))
    return 0


def _run_audit(args: argparse.Namespace) -> int:
    from modelval import api

    reports = api.audit_preprocessing(
        args.model,
        images=args.images,
        measure=args.measure,
        data_root=args.data_root,
        checkpoint_dir=args.checkpoint_dir,
        offline=args.offline,
        device=args.device,
        batch_size=args.batch_size,
        progress=sys.stderr.isatty(),
    )
    if args.json:
        out_json([r.to_dict() for r in reports])
    else:
        out("\n\n".join(_format_audit(r) for r in reports))
    return 0


def _fmt(values: Sequence[float]) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in values) + ")"


def _format_audit(report: AuditReport) -> str:
    """The audit of one model group as text: each source's preprocessing and flags, then the measurements."""
    ref = report.reference
    lines = [
        f"== {report.group}: preprocessing by source ({report.images} real stimuli compared) ==",
        f"reference: mean {_fmt(ref.mean)} std {_fmt(ref.std)}, no resize/crop — {report.reference_origin}",
        f"{'source':<34} {'mean':<22} {'std':<22} {'resize':>6} {'crop':>5} {'interp':<9} {'max|Δ|':>7} "
        f"{'mean|Δ|':>7}  status",
    ]
    for s in report.sources:
        c = s.config
        diff = "n/a" if s.max_abs_diff is None else f"{s.max_abs_diff:.3f}"
        mean_diff = "n/a" if s.mean_abs_diff is None else f"{s.mean_abs_diff:.3f}"
        lines.append(
            f"{s.name + ' [' + s.source + ']':<34} {_fmt(c.mean):<22} {_fmt(c.std):<22} {c.resize or '-'!s:>6} "
            f"{c.crop or '-'!s:>5} {c.interpolation:<9} {diff:>7} {mean_diff:>7}  {s.status}"
        )
        lines.append(f"    from: {s.origin}" + (f" ({'; '.join(s.notes)})" if s.notes else ""))
        lines.extend(f"    ! {flag}" for flag in s.flags)
    if report.measurements:
        lines.append("measured on all stimuli (no resize):")
        lines.append(
            f"    {'model':<22} {'normalization':<22} {'shape bias':>10} {'cue acc.':>9} {'shape':>6} {'texture':>8}"
        )
        for m in report.measurements:
            shown = "withheld" if m.withheld else _fmt_float(m.shape_bias)
            lines.append(
                f"    {m.model:<22} {m.normalization:<22} {shown:>10} "
                f"{_fmt_float(m.cue_accuracy):>9} {m.shape_hits:>6} {m.texture_hits:>8}"
            )
            if m.withheld:
                lines.append(f"      {m.withheld}")
    lines.extend(f"note: {note}" for note in report.measurement_notes)
    return "\n".join(lines)


def _fmt_float(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"
