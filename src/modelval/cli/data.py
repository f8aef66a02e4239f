"""``modelval download-data``, ``verify-data`` and ``datasets``: the public stimuli and human raw data."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval.cli._args import bounded_float, bounded_int
from modelval.cli._options import DATA_ROOT_HELP, add_data_home_option, add_dataset_option
from modelval.cli._output import out
from modelval.datasets.fetch import SOURCES, download_raw_data, download_stimuli
from modelval.datasets.manifest import verify_stimuli
from modelval.datasets.registry import get_dataset, list_datasets
from modelval.datasets.stimuli import discover_stimuli, resolve_data_root, summarize


def register(subparsers: argparse._SubParsersAction) -> None:
    fetch = subparsers.add_parser(
        "download-data",
        help="download and verify a stimulus set (default: the 1280 cue-conflict images), or the human raw data",
        description="Fetch the public stimuli, verify every file against the committed SHA-256 manifest, "
        "and move them into place only when complete. model-vs-human's 14 further sets (colour, contrast, ..., "
        "sketch, stylized) are ImageNet-derived and fetched only here, on request: the licence is shown at the "
        "first fetch, the structure and counts are checked and the archive's SHA-256 recorded (none is "
        "published); a later copy that differs is refused. --humans fetches the published per-image decisions "
        "of the human observers (texture-vs-shape's, with VGG-16 and ResNet-50; with --dataset one of the 14, "
        "model-vs-human's) instead. All honour MODELVAL_MIRROR.",
    )
    add_dataset_option(fetch)
    fetch.add_argument(
        "--humans",
        action="store_true",
        help="fetch the published human raw data (CSV files) of the three texture-vs-shape sets, or with --dataset "
        "NAME of one of model-vs-human's further sets",
    )
    fetch.add_argument(
        "--data-root",
        type=Path,
        metavar="DIR",
        help="the folder to fill (default: $MODELVAL_DATA_ROOT for cue-conflict; else <data home>/<set>, "
        "the data home (--data-home, $MODELVAL_DATA_HOME) being the parent folder of all sets; else the user "
        "cache). With --humans: the raw-data folder (default: <data home>/reference/raw-data, or "
        "reference/model-vs-human/raw-data with --dataset NAME; else the user cache)",
    )
    add_data_home_option(fetch)
    fetch.add_argument("--source", choices=SOURCES, default=None, help="default: the release archive when one exists")
    fetch.add_argument("--url", help="override the archive URL (or the texture-vs-shape base URL)")
    fetch.add_argument("--force", action="store_true", help="download again even if the folder exists")
    fetch.add_argument(
        "--timeout",
        type=bounded_float(0, 3600, "the timeout is more than 0 and at most 3600 seconds", low_open=True),
        default=60.0,
        help="seconds to wait for the server (default 60)",
    )
    fetch.add_argument(
        "--retries",
        type=bounded_int(1, 20, "downloads are tried 1 to 20 times"),
        default=3,
        help="times a download is tried (default 3)",
    )
    fetch.add_argument(
        "--offline",
        action="store_true",
        default=None,
        help="download nothing: verify what is there (also MODELVAL_OFFLINE=1)",
    )
    fetch.set_defaults(handler=run_download)

    verify = subparsers.add_parser("verify-data", help="check a stimulus set against its SHA-256 manifest")
    add_dataset_option(verify)
    verify.add_argument("--data-root", type=Path, metavar="DIR", help=DATA_ROOT_HELP)
    add_data_home_option(verify)
    verify.set_defaults(handler=run_verify)

    listing = subparsers.add_parser("datasets", help="list the registered stimulus sets")
    listing.set_defaults(handler=run_list)


def run_download(args: argparse.Namespace) -> int:
    progress = sys.stderr.isatty()
    if args.humans and get_dataset(args.dataset).source == "model-vs-human":
        from modelval.datasets.human_data import download_model_vs_human_raw_data

        root = download_model_vs_human_raw_data(
            args.dataset, args.data_root, force=args.force, progress=progress, timeout=args.timeout
        )
        out(f"{args.dataset} human raw data ready and verified at {root / args.dataset} (found there by default)")
        return 0
    if args.humans:
        root = download_raw_data(
            args.data_root, force=args.force, progress=progress, timeout=args.timeout, retries=args.retries,
            offline=args.offline,
        )  # fmt: skip
        out(f"human raw data ready and verified at {root} (pass it as --reference-dir, or it is found there)")
        return 0
    root = download_stimuli(
        resolve_data_root(args.data_root, args.dataset),
        dataset=args.dataset,
        source=args.source,
        url=args.url,
        force=args.force,
        progress=progress,
        timeout=args.timeout,
        retries=args.retries,
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


def run_verify(args: argparse.Namespace) -> int:
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


def run_list(args: argparse.Namespace) -> int:
    for entry in list_datasets():
        terms = f"  [{entry.license.split(' (')[0]}; fetched on request]" if entry.fetch_on_request else ""
        out(f"{entry.name:<20} {entry.images:>5} images  {entry.description}{terms}")
    return 0
