"""``modelval validate``: run the user's models file with the verdicts of the pytest validation matrix."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval.cli._args import (
    CHECKPOINT_DIR_HELP,
    add_deprecated_alias,
    add_json_option,
    add_report_dir_option,
    batch_size,
    device_name,
)
from modelval.cli._options import DATA_ROOT_HELP, add_data_home_option
from modelval.cli._output import out, out_json
from modelval.errors import ModelvalError
from modelval.runner.executors import EXECUTORS, SUBMITIT_CLUSTERS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="validate the models of modelval.toml (or [tool.modelval] in pyproject.toml)",
        description="Evaluates every model of the models file under each of its normalization cases and "
        "prints the validation table, with the verdicts of the pytest suite. Exit status 1 when a case fails.",
    )
    parser.add_argument(
        "--models-file",
        type=Path,
        metavar="FILE",
        help="the models file, as the pytest plugin's --modelval-models-file (default: ./modelval.toml, else "
        "[tool.modelval] in ./pyproject.toml)",
    )
    add_deprecated_alias(parser, "--config", "--models-file", dest="models_file", type=Path)
    parser.add_argument("--data-root", metavar="DIR", help=DATA_ROOT_HELP)
    add_data_home_option(parser)
    parser.add_argument("--device", type=device_name, default="auto", help="auto|cpu|cuda[:N]|mps (default: auto)")
    parser.add_argument("--batch-size", type=batch_size, default=32, help="images per batch (default 32)")
    parser.add_argument("--checkpoint-dir", help=CHECKPOINT_DIR_HELP)
    add_json_option(parser, '{"cases": [...]}')
    add_report_dir_option(parser, "the JSON/CSV/Markdown reports, per-image decisions and plots")
    parser.add_argument(
        "--no-output-cache",
        action="store_true",
        help="run every model even when its outputs on these stimuli are stored (or set MODELVAL_NO_CACHE=1)",
    )
    parser.add_argument(
        "--allow-modified-stimuli",
        action="store_true",
        help="evaluate a stimulus folder other than the published 1280 (a subset, for a quick check)",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="serial",
        help="serial (this process); ray: one Ray task per model, a GPU each when the cluster has GPUs "
        "(pip install 'modelval[ray]'); submitit: one SLURM job per model in a job array, requeued when preempted "
        "(pip install 'modelval[slurm]'); the reports are the same",
    )
    parser.add_argument(
        "--submitit-folder",
        metavar="DIR",
        help="--executor submitit: the jobs' scripts and logs (default: ./submitit-jobs; on a cluster, a "
        "shared folder)",
    )
    parser.add_argument(
        "--submitit-cluster",
        choices=SUBMITIT_CLUSTERS,
        help="--executor submitit: auto (SLURM where sbatch exists, else processes here; the default), slurm, "
        "local or debug (in this process)",
    )
    parser.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="--executor submitit: a SLURM or submitit parameter, e.g. partition=gpu, array_parallelism=8, "
        "timeout_min=120, gpus_per_node=1 (repeat the flag for more; defaults: timeout_min=60, one GPU per job)",
    )
    parser.add_argument(
        "--ray-address",
        type=ray_address,
        help="an existing Ray cluster (e.g. auto, ray://head:10001); default: a local instance",
    )
    parser.set_defaults(handler=run)


def ray_address(text: str) -> str:
    """``--ray-address``: auto, local, HOST:PORT or ray://HOST:PORT (checked before anything loads)."""
    from modelval.runner.executors import ray_address_problem

    problem = ray_address_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def run(args: argparse.Namespace) -> int:
    from modelval.datasets.fetch import ensure_stimuli
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.judgement.rows import format_breakdown, format_comparison, format_comparison_notes
    from modelval.records.run_store import default_run_store
    from modelval.runner.cases import build_user_cases
    from modelval.runner.executors import evaluate_models
    from modelval.runner.matrix import ValidationRunner
    from modelval.runner.models_file import find_models_file, read_models_file
    from modelval.runner.reports import format_notes, write_validation_reports

    path = args.models_file or find_models_file()
    if path is None:
        raise ModelvalError(
            f"no models file: write modelval.toml (or [tool.modelval] in pyproject.toml) in {Path.cwd()}, "
            "or pass --models-file FILE; see docs/zoo.md"
        )
    models = read_models_file(path)
    submitit = None
    if args.executor == "submitit":
        from modelval.extras import require
        from modelval.runner.executors import SubmititSettings

        submitit = SubmititSettings.parse(args.submitit_folder, args.submitit_cluster, args.slurm)
        require("submitit", extra="slurm", purpose="--executor submitit")  # before the stimuli load
    if args.executor == "ray":
        from modelval.runner.executors import reach_ray_cluster

        reach_ray_cluster(args.ray_address)  # before the stimuli load: a wrong address is known in seconds
    progress = sys.stderr.isatty()
    root = ensure_stimuli(args.data_root, progress=progress)
    stimuli = StimulusSet.load(root, progress=progress, allow_modified=args.allow_modified_stimuli)
    runner = ValidationRunner(
        stimuli=stimuli,
        device=args.device,  # resolved once per run, by the front door
        checkpoint_dir=Path(args.checkpoint_dir) if args.checkpoint_dir else None,
        batch_size=args.batch_size,
        run_store=default_run_store(),
        output_cache=False if args.no_output_cache else None,
    )
    runner.add_user_models(models)
    cases = build_user_cases(models)
    if args.executor != "serial":
        # Every model evaluated up front as tasks (one per model); each case then judges its stored evaluation.
        work: dict[str, list[str]] = {}
        for case in cases:
            work.setdefault(case.model, []).append(case.normalization)
        evaluate_models(
            runner, list(work.items()), executor=args.executor, address=args.ray_address, submitit=submitit
        )
    judgements = []
    for case in cases:
        if progress:
            print(f"validating {case.id} ...", file=sys.stderr)
        # A model that cannot be loaded or run fails its own cases (verdict ERROR); the other models still run.
        judgements.append(runner.run(case))
    failed = [(case, j) for case, j in zip(cases, judgements, strict=True) if not j.passed]
    written = []
    if args.report_dir:
        written = write_validation_reports(runner.rows, runner.evaluations, args.report_dir, runner.run_store)
    if args.json:
        rows: list[dict[str, object]] = []
        for case, judgement in zip(cases, judgements, strict=True):
            assert judgement.row is not None
            record = judgement.row.to_dict()  # a withheld shape bias is null with its reason
            rows.append(
                {
                    "label": judgement.row.label,
                    "spec": case.user.spec if case.user else case.model,
                    "normalization": judgement.row.normalization,
                    **{key: record[key] for key in ("shape_bias", "expected", "difference", "verdict")},
                    **({"error": judgement.message} if judgement.row.error is not None else {}),
                }
            )
        out_json({"models_file": str(path), "cases": rows, "written": [str(p) for p in written]})
    else:
        out(f"models file: {path}")
        out(format_comparison(runner.rows))
        notes = format_comparison_notes(runner.rows)  # why an Expected value is missing
        if notes:
            out(notes)
        out()
        out(format_breakdown(runner.rows))
        for line in format_notes(runner.rows):
            out(line)
        for case, judgement in failed:
            out(f"\nFAILED {case.id}: {judgement.message}")
        if written:
            out(f"\nwrote {len(written)} files into {args.report_dir}")
    if failed:
        print(f"modelval: {len(failed)} of {len(cases)} cases failed", file=sys.stderr)
        return 1
    return 0
