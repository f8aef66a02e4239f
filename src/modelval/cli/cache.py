"""``modelval cache info`` and ``modelval cache clear``: every cache modelval keeps (:mod:`modelval.records.store`):
the output cache (models' stored outputs), the decode cache (the decoded stimuli, about 184 MiB per set) and the
answer cache (VLM answers)."""

from __future__ import annotations

import argparse
from typing import Any

from modelval.cli._args import add_json_option
from modelval.cli._output import out, out_json


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``modelval cache info|clear``.

    Parameters
    ----------
    subparsers
        The command line's sub-commands.
    """
    parser = subparsers.add_parser(
        "cache",
        help="show or empty the caches: models' stored outputs, decoded stimuli, VLM answers",
        description="The output cache keeps each model's raw outputs on a stimulus set, keyed by everything that "
        "can change them (weights, architecture, preprocessing, stimuli, precision, device class, versions), so "
        "a second analysis of the same model needs no forward pass. The decode cache keeps the cue-conflict "
        "stimuli decoded (about 184 MiB per set), so PNG decoding happens once; the answer cache keeps a VLM's "
        "answers. Each is a folder of $MODELVAL_CACHE_DIR (default: the per-user cache) kept under "
        "$MODELVAL_CACHE_SIZE (default 2G); MODELVAL_NO_CACHE=1 turns them all off.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    info = actions.add_parser("info", help="where each cache is, how many entries, how many bytes, which models")
    add_json_option(info)
    info.set_defaults(handler=_info)
    clear = actions.add_parser(
        "clear",
        help="remove every stored output, interrupted run, decoded stimulus set, VLM answer and temporary file "
        "(only what modelval made)",
        description="Remove modelval's entries from every cache (the stored outputs and the rows of interrupted "
        "runs, the decoded stimuli, the VLM answers) and the temporary files of their writers. A file or folder "
        "modelval did not make is left where it is, and named.",
    )
    add_json_option(clear)
    clear.set_defaults(handler=_clear)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _stores() -> dict[str, Any]:
    """Every cache by its name in the JSON (the output cache's fields stand at the top)."""
    from modelval.datasets.cache import DecodeCache
    from modelval.records.answer_cache import AnswerStore
    from modelval.records.output_cache import OutputCache

    return {"output_cache": OutputCache(), "decode_cache": DecodeCache(), "answer_cache": AnswerStore()}


def _plural(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _info(args: argparse.Namespace) -> int:
    stores = _stores()
    infos = {name: store.info() for name, store in stores.items()}
    if args.json:
        out_json({**infos.pop("output_cache"), **infos})
        return 0
    for name, store in stores.items():
        info = infos[name]
        state = "on" if info["enabled"] else "off (MODELVAL_NO_CACHE is set)"
        out(
            f"{name.replace('_', ' ')}: {info['path']} ({state}): {info['entries']} {store.what}(s), "
            f"{_size(info['bytes'])}; `modelval cache clear` removes them"
        )
        out(f"  entries: {info['entries']}, {_size(info['bytes'])} of {_size(info['max_bytes'])}")
        if info["interrupted_runs"]:
            out(f"  {store.partial_what}: {info['interrupted_runs']}, {_size(info['interrupted_bytes'])}")
        if info["temporary_files"]:
            out(f"  temporary files of writers: {info['temporary_files']}, {_size(info['temporary_bytes'])} (those of "
                "killed writers go with the next write, or with `modelval cache clear`)")  # fmt: skip
        if info["not_modelvals"]:
            out("  not modelval's (left alone): " + ", ".join(info["not_modelvals"]))
        if info.get("models"):
            out("  models: " + ", ".join(info["models"]))
    return 0


def _clear(args: argparse.Namespace) -> int:
    stores = _stores()
    cleared = {name: store.clear() for name, store in stores.items()}
    if args.json:
        fields = {
            name: {"path": str(stores[name].root), "removed": done.entries, "interrupted_runs": done.interrupted_runs,
                   "temporary_files": done.temporary_files, "bytes": done.bytes, "left": list(done.left)}
            for name, done in cleared.items()
        }  # fmt: skip
        out_json({**fields.pop("output_cache"), **fields})
        return 0
    for name, done in cleared.items():
        store = stores[name]
        parts = [_plural(done.entries, store.what)]
        if done.interrupted_runs:
            parts.append(_plural(done.interrupted_runs, "interrupted run"))
        if done.temporary_files:
            parts.append(_plural(done.temporary_files, "temporary file"))
        out(f"removed {', '.join(parts)} ({_size(done.bytes)}) from {store.root}")
        if done.left:
            out("  left alone (modelval did not make them): " + ", ".join(done.left))
            if name == "output_cache":  # an entry of a modelval before marks is among them, and stays
                out("  (a folder with no modelval mark is never removed, even an older modelval's entry: delete it "
                    "yourself if it is one)")
    return 0
