"""``modelval download-data`` and ``modelval verify-data``: the public cue-conflict stimuli."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelval.datasets.fetch import download_stimuli
from modelval.datasets.manifest import verify_stimuli
from modelval.datasets.stimuli import discover_stimuli, resolve_data_root, summarize


def register(subparsers: argparse._SubParsersAction) -> None:
    fetch = subparsers.add_parser(
        "download-data",
        help="download and verify the 1280 cue-conflict stimuli",
        description="Fetch the public stimuli, verify every file against the committed SHA-256 manifest, "
        "and move them into place only when complete.",
    )
    fetch.add_argument("--data-root", type=Path, help="destination (default: $MODELVAL_DATA_ROOT or the user cache)")
    fetch.add_argument("--source", choices=("model-vs-human", "texture-vs-shape"), default="model-vs-human")
    fetch.add_argument("--url", help="override the archive URL (or the texture-vs-shape base URL)")
    fetch.add_argument("--force", action="store_true", help="download again even if the folder exists")
    fetch.add_argument("--timeout", type=float, default=60.0)
    fetch.add_argument("--retries", type=int, default=3)
    fetch.set_defaults(handler=run_download)

    verify = subparsers.add_parser("verify-data", help="check the stimuli against the SHA-256 manifest")
    verify.add_argument("--data-root", type=Path)
    verify.set_defaults(handler=run_verify)


def run_download(args: argparse.Namespace) -> int:
    root = download_stimuli(
        resolve_data_root(args.data_root),
        source=args.source,
        url=args.url,
        force=args.force,
        progress=sys.stderr.isatty(),
        timeout=args.timeout,
        retries=args.retries,
    )
    print(f"cue-conflict stimuli ready and verified at {root}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    root = resolve_data_root(args.data_root)
    verify_stimuli(root)
    counts = summarize(discover_stimuli(root))
    print(f"{root}: {counts['images']} images ({counts['conflicts']} conflicts) match the manifest")
    return 0
