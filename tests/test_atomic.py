"""Files written whole: a killed writer's temporary file is removed by the next writer of that file, a live
writer's never; a long file name still gets a temporary file (issue 31: 7 and 8)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelval import atomic
from modelval.atomic import STARTING_SECONDS, remove_dead_temporaries, replacing, write_text

ROOT = Path(__file__).resolve().parents[1]

#: What ``--save-outputs`` does (``api.saved_outputs.save_outputs``): ``np.save`` into ``replacing(...)``.
KILLED_WRITER = """
import os, signal, sys
import numpy as np
from modelval.atomic import replacing
with replacing(sys.argv[1], binary=True) as handle:
    np.save(handle, np.zeros((1280, 1000), np.float32), allow_pickle=False)
    handle.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""

HOLDING_WRITER = """
import sys, time
from modelval.atomic import replacing
with replacing(sys.argv[1]) as handle:
    handle.write("half")
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, **kwargs)


def test_the_next_writer_removes_what_a_killed_save_outputs_left(tmp_path):
    """SIGKILL in the middle of writing outputs.npy leaves a 5 MB temporary file; today it stayed for good."""
    target = tmp_path / "saved" / "outputs.npy"
    target.parent.mkdir()
    assert _python(KILLED_WRITER, str(target)).wait(timeout=60) == -9
    (left,) = target.parent.iterdir()
    assert left.name.startswith(".outputs.npy.modelval-") and left.stat().st_size > 5_000_000
    assert remove_dead_temporaries(target) == []  # just made: its writer may not hold the lock yet
    _age(left, STARTING_SECONDS + 1)
    with replacing(target, binary=True) as handle:
        handle.write(b"the next run's outputs")
    assert [p.name for p in target.parent.iterdir()] == ["outputs.npy"]


def test_a_live_writers_temporary_file_is_never_removed(tmp_path):
    target = tmp_path / "report.json"
    writer = _python(HOLDING_WRITER, str(target), stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        (live,) = tmp_path.glob(".report.json.modelval-*.tmp")
        _age(live, 3 * 24 * 3600)  # old, but its writer holds the lock
        write_text(target, "another process's report")
        assert live.exists() and target.read_text() == "another process's report"
    finally:
        writer.kill()
        writer.wait(timeout=20)
    write_text(target, "the next report")  # the writer is gone now: its file goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_only_modelvals_own_temporary_files_are_considered(tmp_path):
    target = tmp_path / "table.csv"
    mine = [tmp_path / ".table.csv.swp", tmp_path / ".table.csv.backup.tmp", tmp_path / ".table.csv.x.tmp"]
    for path in mine:
        path.write_text("the user's")
        _age(path, 3 * 24 * 3600)
    write_text(target, "a,b\n")
    assert all(path.read_text() == "the user's" for path in mine)


@pytest.mark.parametrize("length", [200, 240, 255])
def test_a_long_file_name_is_written(tmp_path, length):
    """A name of up to 255 bytes is legal; today a temporary name of ``.<name>.<random>.tmp`` was too long."""
    target = tmp_path / ("r" * (length - 5) + ".json")
    write_text(target, "{}")
    assert target.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == [target.name]
    assert len(atomic.temporary_pattern(target)) < 200
