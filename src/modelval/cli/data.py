"""``modelval data download|verify|list``: the public stimuli and human raw data."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval.cli._options import add_settings
from modelval.cli._output import out
from modelval.datasets.fetch import SOURCES, download_raw_data, download_stimuli
from modelval.datasets.manifest import verify_stimuli
from modelval.datasets.registry import DATASET_NAMES, get_dataset, list_datasets
from modelval.datasets.stimuli import discover_stimuli, resolve_data_root, summarize


def _add_dataset_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=DATASET_NAMES, default="cue-conflict",
                        help="stimulus set (default: cue-conflict)")  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval data`` to the command line.

    Parameters
    ----------
    subparsers
        The command line's commands.
    """
    group = subparsers.add_parser(
        "data",
        help="download, verify and list the stimulus sets and the human raw data",
        description="The public stimuli and the published human raw data, in the data home (docs/data.md).",
    )
    actions = group.add_subparsers(dest="action", required=True, metavar="ACTION")
    fetch = actions.add_parser(
        "download",
        help="download and verify a stimulus set (default: the 1280 cue-conflict images), or the human raw data",
        description="Fetch the public stimuli, verify every file against the committed SHA-256 manifest, "
        "and move them into place only when complete. model-vs-human's 14 further sets (colour, contrast, ..., "
        "sketch, stylized) are ImageNet-derived and fetched only here, on request: the licence is shown at the "
        "first fetch, the structure and counts are checked and the archive's SHA-256 recorded (none is "
        "published); a later copy that differs is refused. --humans fetches the published per-image decisions "
        "of the human observers (texture-vs-shape's, with VGG-16 and ResNet-50; with --dataset one of the 14, "
        "model-vs-human's) instead. All honour $MODELVAL_MIRROR.",
    )
    _add_dataset_option(fetch)
    fetch.add_argument(
        "--humans",
        action="store_true",
        help="fetch the published human raw data (CSV files) of the three texture-vs-shape sets, or with --dataset "
        "NAME of one of model-vs-human's further sets",
    )
    fetch.add_argument("--source", choices=SOURCES, default=None, help="default: the release archive when one exists")
    fetch.add_argument("--force", action="store_true", help="download again even if the folder exists")
    add_settings(fetch, "data_home", "data_root", "offline", quiet=("download_timeout", "download_retries"), help={
        "data_root": "the folder to fill (default: <data home>/<set>). With --humans: the raw-data folder "
        "(default: <data home>/reference/raw-data, or reference/model-vs-human/raw-data with --dataset NAME)",
        "offline": "download nothing: verify what is there",
    })  # fmt: skip
    fetch.set_defaults(handler=_run_download)

    verify = actions.add_parser("verify", help="check a stimulus set against its SHA-256 manifest")
    _add_dataset_option(verify)
    add_settings(verify, "data_home", "data_root")
    verify.set_defaults(handler=_run_verify)

    listing = actions.add_parser("list", help="list the registered stimulus sets")
    listing.set_defaults(handler=_run_list)


def _run_download(args: argparse.Namespace) -> int:
    progress = sys.stderr.isatty()
    if args.humans and get_dataset(args.dataset).humans == "model-vs-human":
        from modelval.datasets.human_data import download_model_vs_human_raw_data

        root = download_model_vs_human_raw_data(
            args.dataset, args.data_root, force=args.force, progress=progress, timeout=args.download_timeout,
            retries=args.download_retries, offline=args.offline,
        )  # fmt: skip
        out(f"{args.dataset} human raw data ready and verified at {root / args.dataset} (found there by default)")
        return 0
    if args.humans:
        root = download_raw_data(
            args.data_root, force=args.force, progress=progress, timeout=args.download_timeout,
            retries=args.download_retries, offline=args.offline,
        )  # fmt: skip
        out(f"human raw data ready and verified at {root} (pass it as --reference-dir, or it is found there)")
        return 0
    root = download_stimuli(
        resolve_data_root(args.data_root, args.dataset),
        dataset=args.dataset,
        source=args.source,
        force=args.force,
        progress=progress,
        timeout=args.download_timeout,
        retries=args.download_retries,
        offline=args.offline,
    )
    if get_dataset(args.dataset).manifest is None:
        out(f"{args.dataset} stimuli ready at {root}: {_release_status(root, args.dataset)}")
        return 0
    out(f"{args.dataset} stimuli ready and verified at {root}")
    return 0


def _release_status(root: Path, dataset: str) -> str:
    """model-vs-human's further sets: structure and counts, and the files against the record of the first fetch."""
    from modelval.datasets.manifest import hash_stimuli
    from modelval.datasets.release import release_status

    stimuli = discover_stimuli(root, dataset=dataset)
    return release_status(root, dataset, hash_stimuli(root, [s.relpath for s in stimuli]))


def _run_verify(args: argparse.Namespace) -> int:
    root = resolve_data_root(args.data_root, args.dataset)
    if get_dataset(args.dataset).manifest is None:
        out(f"{root}: {_release_status(root, args.dataset)}")
        return 0
    verify_stimuli(root, dataset=args.dataset)
    stimuli = discover_stimuli(root, dataset=args.dataset)
    if get_dataset(args.dataset).has_conflicts:
        counts = summarize(stimuli)
        out(f"{root}: {counts['images']} images ({counts['conflicts']} conflicts) match the manifest")
    else:
        out(f"{root}: {len(stimuli)} images match the manifest")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    for entry in list_datasets():
        terms = f"  [{entry.license.split(' (')[0]}; fetched on request]" if entry.fetch_on_request else ""
        out(f"{entry.name:<20} {entry.images:>5} images  {entry.description}{terms}")
    return 0
