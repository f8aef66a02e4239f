"""``modelval runs list|show|diff|verdict``: the runs recorded in the run store, and a nightly's verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from modelval.api.recording import MAX_WINDOW_HOURS, NIGHTLY_WINDOW_HOURS
from modelval.cli._args import add_json_option, add_report_dir_option, range_type
from modelval.cli._output import out, out_json, warn
from modelval.records.run_store import RUN_ID, RUN_LIMIT

run_id = range_type(RUN_ID)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval runs`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    parser = subparsers.add_parser(
        "runs",
        help="list, show and compare recorded runs (what changed since the last run?)",
        description="Every run (shape-bias, accuracy, humans, sensitivity, rescore, validate cases, baseline "
        "compare) is recorded with its numbers, per-image decisions and provenance in an SQLite file "
        "($MODELVAL_RUNS_DB, else the per-user data folder; MODELVAL_NO_RUN_STORE=1 records nothing).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the newest runs first")
    listing.add_argument("--model", help="only this model (the spec as given)")
    listing.add_argument("--command", help="only this command (shape-bias, accuracy, humans, validate, ...)")
    listing.add_argument("--limit", type=range_type(RUN_LIMIT), default=20, help="how many (default 20)")
    add_json_option(listing)
    listing.set_defaults(handler=_run_list)
    show = actions.add_parser("show", help="one run: its numbers and provenance")
    show.add_argument("run", type=run_id, metavar="ID")
    show.add_argument("--decisions", action="store_true", help="with its per-image decisions (JSON)")
    add_json_option(show)
    show.set_defaults(handler=_run_show)
    diff = actions.add_parser(
        "diff",
        help="what differs between two runs: values, decisions flipped per category, provenance fields",
        description="With one ID, the run is compared with the run before it of the same command, model and "
        "protocol (last night's, for a nightly).",
    )
    diff.add_argument("first", type=run_id, metavar="A")
    diff.add_argument("second", type=run_id, nargs="?", metavar="B")
    add_json_option(diff)
    diff.set_defaults(handler=_run_diff)
    verdict = actions.add_parser(
        "verdict",
        help="a nightly's verdict: new failures, known failures, fixed, flaky, skipped (exit 1 on a new failure "
        "or an unaccepted fix)",
        description="Holds the last nightly (the validate records of the newest record's session, "
        "$MODELVAL_SESSION, within --window hours before it, or before run RUN) against the expected status of "
        "each (model, NORMALIZATION/DEVICE/DTYPE) in the status "
        "file. A known failure that passes is 'fixed' and fails the check until accepted (a ratchet); a case "
        "recorded twice, failing then passing (a rerun), is 'flaky'. Exit 0: nothing new; 1: a new failure, a fix, "
        "a configuration not listed or not run; 2: bad input. See docs/nightly.md.",
    )
    verdict.add_argument("run", type=run_id, nargs="?", metavar="RUN", help="the nightly's last record (default: "
                         "the newest validate record)")  # fmt: skip
    verdict.add_argument("--status", type=Path, required=True, metavar="FILE", help="the status file (TOML)")
    verdict.add_argument(
        "--window", type=_positive_hours, default=NIGHTLY_WINDOW_HOURS, metavar="HOURS",
        help=f"how far back from the last record the nightly reaches (default {NIGHTLY_WINDOW_HOURS:g})",
    )  # fmt: skip
    add_report_dir_option(verdict, "the nightly's page (index.html, self-contained), report.json, verdict.md and "
                          "the failing cases' flipped stimuli as thumbnails (docs/nightly.md)")  # fmt: skip
    verdict.add_argument(
        "--accept", nargs="?", const="all", metavar="WHAT",
        help="rewrite the status file to accept this nightly's failing cases: all (the default: fixes pass, new "
        "failures become known failures), fixes (never a new failure), or MODEL[@CONFIGURATION],... (exit 1 while "
        "a failing case is left)",
    )  # fmt: skip
    add_json_option(verdict, "the verdict")
    verdict.set_defaults(handler=_run_verdict)


def _positive_hours(text: str) -> float:
    """``--window``: a positive number of hours, at most :data:`MAX_WINDOW_HOURS`."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value <= MAX_WINDOW_HOURS):
        raise argparse.ArgumentTypeError(f"a positive number of hours, at most {MAX_WINDOW_HOURS}, got {text!r}")
    return value


def _run_list(args: argparse.Namespace) -> int:
    from modelval.records.run_store import RunStore

    store = RunStore()
    runs = store.runs(model=args.model, command=args.command, limit=args.limit, skipped=warn)
    if args.json:
        out_json([run.to_dict() for run in runs])
        return 0
    if not runs:
        filters = [f"{name} {value}" for name, value in (("--model", args.model), ("--command", args.command)) if value]
        out(f"no runs{' matching ' + ' '.join(filters) if filters else ''} recorded in {store.path} ({_moved_by()})")
        return 0
    out(f"{'id':>5}  {'created':<25}  {'command':<11}  {'model':<28}  value")
    for run in runs:
        value = next((f"{k} {_value(v)}" for k, v in run.summary.items() if isinstance(v, int | float)), "")
        out(f"{run.id:>5}  {run.created:<25}  {run.command:<11}  {str(run.model)[:28]:<28}  {value}")
    shown = f"{len(runs)} run{'' if len(runs) == 1 else 's'}"
    out(f"{shown}, newest first, from the run store {store.path} ({_moved_by()})")
    return 0


def _moved_by() -> str:
    from modelval.records.run_store import RUNS_DB_ENV

    return f"{RUNS_DB_ENV}=FILE moves it"


def _value(value: float) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _run_show(args: argparse.Namespace) -> int:
    from modelval.records.run_store import RunStore

    run = RunStore().get(args.run)
    if args.json or args.decisions:
        out_json(run.to_dict(decisions=args.decisions))
        return 0
    out(f"run {run.id}: {run.command} {run.model} ({run.label}), {run.created}")
    for key, value in run.summary.items():
        out(f"  {key}: {value}")
    packages = run.provenance.get("packages") or {}
    versions = ", ".join(f"{name} {version}" for name, version in packages.items() if version)
    out(f"  versions: {versions}")
    return 0


def _run_diff(args: argparse.Namespace) -> int:
    from modelval.errors import DataError
    from modelval.records.run_diff import diff_runs
    from modelval.records.run_store import RunStore

    store = RunStore()
    if args.second is None:
        later = store.get(args.first)
        earlier = store.previous(later)
        if earlier is None:
            raise DataError(f"run {later.id} has no earlier run of the same command, model and protocol")
    else:
        earlier, later = store.get(args.first), store.get(args.second)
    difference = diff_runs(earlier, later)
    if args.json:
        out_json(difference.to_dict())
    else:
        out(difference.format())
    return 0


def _run_verdict(args: argparse.Namespace) -> int:
    from modelval.api.recording import nightly_verdict

    if args.report_dir:  # the page shows the nightly as it was judged, before an --accept rewrites the status file
        from modelval.api.report import nightly_report

        nightly_report(args.report_dir, args.status, args.run, window_hours=args.window)
    verdict = nightly_verdict(args.status, args.run, window_hours=args.window, accept=args.accept)
    if args.json:
        out_json(verdict.to_dict())
    else:
        out(verdict.format())
        if verdict.accepted:
            out(f"accepted in {verdict.accepted}: {', '.join(verdict.accepted_cases) or 'nothing failed'}")
        if args.report_dir:
            out(f"wrote the nightly's page: {args.report_dir / 'index.html'}")
    return verdict.exit_code
