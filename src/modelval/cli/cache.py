"""``modelval cache info`` and ``modelval cache clear``: the output cache (stored model outputs)."""

from __future__ import annotations

import argparse

from modelval.cli._args import add_json_option
from modelval.cli._output import out, out_json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show or empty the output cache (models' stored outputs on the stimuli)",
        description="The output cache keeps each model's raw outputs on a stimulus set, keyed by everything that "
        "can change them (weights, architecture, preprocessing, stimuli, precision, device class, versions), so "
        "a second analysis of the same model needs no forward pass. Location: $MODELVAL_OUTPUT_CACHE, else the "
        "per-user cache; size limit: $MODELVAL_OUTPUT_CACHE_SIZE (default 2G).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    info = actions.add_parser("info", help="where it is, how many entries, how many bytes, which models")
    add_json_option(info)
    info.set_defaults(handler=run_info)
    clear = actions.add_parser(
        "clear",
        help="remove every stored output, interrupted run and temporary file (only what modelval made)",
        description="Remove modelval's entries from the output cache: the stored outputs, the rows of interrupted "
        "runs and the temporary files of killed writers. A file or folder modelval did not make is left where it "
        "is, and named.",
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


def run_info(args: argparse.Namespace) -> int:
    from modelval.records.output_cache import OutputCache, output_cache_enabled

    info = {**OutputCache().info(), "enabled": output_cache_enabled()}
    if args.json:
        out_json(info)
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
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from modelval.records.output_cache import OutputCache

    cache = OutputCache()
    cleared = cache.clear()
    if args.json:
        out_json({
            "path": str(cache.root), "removed": cleared.entries, "interrupted_runs": cleared.interrupted_runs,
            "temporary_files": cleared.temporary_files, "answer_files": cleared.answer_files, "bytes": cleared.bytes,
            "left": list(cleared.left),
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
    return 0
