"""`cache clear` deletes only entries modelval marked as its own (issue 42 point 3): a user's folder that merely
looks like an output-cache entry (hex names holding a meta.json or a partial/ folder) stays, and is named."""

from __future__ import annotations

import json

import numpy as np

from modelval.records.output_cache import ENTRY_MARK, OutputCache


def _lookalikes(cache: OutputCache) -> dict[str, bytes]:
    """A user's folders under hex names, shaped like entries."""
    files = {
        f"ef/{'ef' * 32}/meta.json": b'{"mine": true}',
        f"ef/{'ef' * 32}/outputs.npy": b"my data",
        f"01/{'01' * 20}/partial/notes.npy": b"my partial work",
    }
    for name, data in files.items():
        (cache.root / name).parent.mkdir(parents=True, exist_ok=True)
        (cache.root / name).write_bytes(data)
    return files


def test_clear_leaves_unmarked_lookalike_folders(tmp_path):
    cache = OutputCache(tmp_path / "outputs")
    outputs = np.ones((4, 10), dtype=np.float32)
    cache.save("ab" * 32, outputs, {"model": "m"}, probe=outputs[:1])
    cache.start_rows("cd" * 32, outputs[:1])
    assert (cache.entry_dir("ab" * 32) / ENTRY_MARK).is_file() and (cache.entry_dir("cd" * 32) / ENTRY_MARK).is_file()
    mine = _lookalikes(cache)
    info = cache.info()
    assert (info["entries"], info["interrupted_runs"]) == (1, 1)
    assert f"ef/{'ef' * 32}" in info["not_modelvals"] and f"01/{'01' * 20}" in info["not_modelvals"]
    cleared = cache.clear()
    assert (cleared.entries, cleared.interrupted_runs) == (1, 1)
    for name, data in mine.items():
        assert (cache.root / name).read_bytes() == data, name
    assert not cache.entry_dir("ab" * 32).exists() and not cache.entry_dir("cd" * 32).exists()


def test_eviction_leaves_unmarked_lookalike_folders(tmp_path):
    cache = OutputCache(tmp_path / "outputs", max_bytes=0)
    mine = _lookalikes(cache)
    outputs = np.ones((4, 10), dtype=np.float32)
    cache.save("ab" * 32, outputs, {"model": "m"}, probe=outputs[:1])  # over the limit: evicts what is its own
    for name, data in mine.items():
        assert (cache.root / name).read_bytes() == data, name


def test_an_entry_made_before_marks_is_left_and_said(tmp_path, monkeypatch, capsys):
    from modelval.cli import main

    cache = OutputCache(tmp_path / "cache" / "outputs")
    outputs = np.ones((4, 10), dtype=np.float32)
    cache.save("ab" * 32, outputs, {"model": "m"}, probe=outputs[:1])
    (cache.entry_dir("ab" * 32) / ENTRY_MARK).unlink()  # as an older modelval wrote it
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["cache", "clear", "--json"]) == 0
    cleared = json.loads(capsys.readouterr().out)
    assert cleared["removed"] == 0 and cleared["left"] == [f"ab/{'ab' * 32}"]
    assert (cache.entry_dir("ab" * 32) / "meta.json").is_file()
    assert main(["cache", "clear"]) == 0
    assert "no modelval mark" in capsys.readouterr().out
