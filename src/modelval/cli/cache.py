"""``modelval cache info`` and ``modelval cache clear``: the output cache (stored model outputs) and the decode cache
(the decoded cue-conflict stimuli, :mod:`modelval.datasets.cache`, about 184 MiB per stimulus set)."""

from __future__ import annotations

import argparse
import re
from typing import Any

from modelval.cli._args import add_json_option
from modelval.cli._output import out, out_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show or empty the output cache (models' stored outputs) and the decode cache (decoded stimuli)",
        description="The output cache keeps each model's raw outputs on a stimulus set, keyed by everything that "
        "can change them (weights, architecture, preprocessing, stimuli, precision, device class, versions), so "
        "a second analysis of the same model needs no forward pass. Location: $MODELVAL_OUTPUT_CACHE, else the "
        "per-user cache; size limit: $MODELVAL_OUTPUT_CACHE_SIZE (default 2G). The decode cache keeps the "
        "cue-conflict stimuli decoded (about 184 MiB per set) in <per-user cache>/stimuli, so PNG decoding happens "
        "once; `cache clear` empties both (the next run decodes the PNGs again).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    info = actions.add_parser("info", help="where it is, how many entries, how many bytes, which models")
    add_json_option(info)
    info.set_defaults(handler=run_info)
    clear = actions.add_parser(
        "clear",
        help="remove every stored output, interrupted run, decoded stimulus set and temporary file (only what "
        "modelval made)",
        description="Remove modelval's entries from the output cache (the stored outputs, the rows of interrupted "
        "runs and the temporary files of killed writers) and from the decode cache (the decoded stimuli, rebuilt "
        "from the PNGs by the next run). A file or folder modelval did not make is left where it is, and named.",
    )
    add_json_option(clear)
    clear.set_defaults(handler=run_clear)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


#: A decode-cache entry: ``<32 hex>.npy`` with its ``.json`` sidecar and ``.npy.lock``; writers' ``.<name>.*.tmp``.
_ENTRY = re.compile(r"^[0-9a-f]{32}\.(npy|json|npy\.lock)$")
_TEMPORARY = re.compile(r"^\.[0-9a-f]{32}\.(npy|json)\..*\.tmp$")


def decode_cache_info() -> dict[str, Any]:
    """Where the decode cache is, its entries (decoded stimulus sets) and bytes, and whether it is used."""
    from modelval.datasets.cache import cache_enabled, default_cache_dir

    folder = default_cache_dir()
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    mine = [f for f in files if f.is_file() and (_ENTRY.match(f.name) or _TEMPORARY.match(f.name))]
    return {
        "path": str(folder),
        "enabled": cache_enabled(),
        "entries": sum(f.suffix == ".npy" and not f.name.startswith(".") for f in mine),
        "bytes": sum(f.stat().st_size for f in mine),
        "not_modelvals": [str(f) for f in files if f not in mine],
        "cleared_by": "modelval cache clear",
    }


def clear_decode_cache() -> tuple[int, int, list[str]]:
    """Remove modelval's decode-cache files: ``(entries removed, bytes, what was left alone)``."""
    from modelval.datasets.cache import default_cache_dir

    folder = default_cache_dir()
    entries = removed = 0
    left: list[str] = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        if not path.is_file() or not (_ENTRY.match(path.name) or _TEMPORARY.match(path.name)):
            left.append(str(path))
            continue
        size = path.stat().st_size
        path.unlink(missing_ok=True)
        removed += size
        entries += path.suffix == ".npy" and not path.name.startswith(".")
    return entries, removed, left


def run_info(args: argparse.Namespace) -> int:
    from modelval.records.output_cache import OutputCache, output_cache_enabled

    info = {**OutputCache().info(), "enabled": output_cache_enabled()}
    decode = decode_cache_info()
    if args.json:
        out_json({**info, "decode_cache": decode})
        return 0
    state = "on" if info["enabled"] else "off (MODELVAL_NO_OUTPUT_CACHE is set)"
    out(f"output cache: {info['path']} ({state})")
    out(f"entries: {info['entries']}, {_size(info['bytes'])} of {_size(info['max_bytes'])}")
    if info["interrupted_runs"]:
        out(f"interrupted runs (resumable): {info['interrupted_runs']}, {_size(info['interrupted_bytes'])}")
    if info["temporary_files"]:
        out(
            f"temporary files of writers: {info['temporary_files']}, {_size(info['temporary_bytes'])} (those of killed "
            "writers go with the next write, or with `modelval cache clear`)"
        )
    if info["answer_files"]:
        out(f"VLM answers: {info['answer_files']} file(s), {_size(info['answer_bytes'])}")
    if info["not_modelvals"]:
        out("not modelval's (left alone): " + ", ".join(info["not_modelvals"]))
    if info["models"]:
        out("models: " + ", ".join(info["models"]))
    state = "on" if decode["enabled"] else "off (MODELVAL_NO_STIMULUS_CACHE is set)"
    out(
        f"decode cache: {decode['path']} ({state}): {decode['entries']} decoded stimulus set(s), "
        f"{_size(decode['bytes'])}; `modelval cache clear` removes them (the next run decodes the PNGs)"
    )
    if decode["not_modelvals"]:
        out("  not modelval's (left alone): " + ", ".join(decode["not_modelvals"]))
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from modelval.records.output_cache import OutputCache

    cache = OutputCache()
    cleared = cache.clear()
    decoded, decoded_bytes, decoded_left = clear_decode_cache()
    if args.json:
        out_json({
            "path": str(cache.root), "removed": cleared.entries, "interrupted_runs": cleared.interrupted_runs,
            "temporary_files": cleared.temporary_files, "answer_files": cleared.answer_files, "bytes": cleared.bytes,
            "left": list(cleared.left),
            "decode_cache": {"removed": decoded, "bytes": decoded_bytes, "left": decoded_left},
        })  # fmt: skip
        return 0
    parts = [f"{cleared.entries} stored output{'s' if cleared.entries != 1 else ''}"]
    if cleared.interrupted_runs:
        parts.append(f"{cleared.interrupted_runs} interrupted run{'s' if cleared.interrupted_runs != 1 else ''}")
    if cleared.answer_files:
        parts.append(f"{cleared.answer_files} VLM answer file{'s' if cleared.answer_files != 1 else ''}")
    if cleared.temporary_files:
        parts.append(f"{cleared.temporary_files} temporary file{'s' if cleared.temporary_files != 1 else ''}")
    out(f"removed {', '.join(parts)} ({_size(cleared.bytes)}) from {cache.root}")
    if cleared.left:
        out("left alone (modelval did not make them): " + ", ".join(cleared.left))
    from modelval.datasets.cache import default_cache_dir

    out(f"removed {decoded} decoded stimulus set{'s' if decoded != 1 else ''} ({_size(decoded_bytes)}) from "
        f"{default_cache_dir()}")  # fmt: skip
    if decoded_left:
        out("left alone (modelval did not make them): " + ", ".join(decoded_left))
    return 0
