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
    clear = actions.add_parser("clear", help="remove every stored output (and interrupted runs)")
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
        out(f"interrupted runs (resumable): {info['interrupted_runs']}")
    if info["models"]:
        out("models: " + ", ".join(info["models"]))
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from modelval.records.output_cache import OutputCache

    cache = OutputCache()
    removed = cache.clear()
    if args.json:
        out_json({"path": str(cache.root), "removed": removed})
    else:
        out(f"removed {removed} stored output{'s' if removed != 1 else ''} from {cache.root}")
    return 0
