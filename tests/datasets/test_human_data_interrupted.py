"""A killed model-vs-human human-data download leaves nothing behind (issue 42 point 3): SIGTERM removes its
staging folder at once, and the marked staging folder a SIGKILL leaves goes with the next download."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_download_interrupted import SlowServer

ROOT = Path(__file__).resolve().parents[2]


def _start(destination: Path, mirror: str) -> subprocess.Popen:
    code = (
        "from modelval.download import sigterm_exits_cleanly\n"
        "from modelval.datasets.human_data import download_model_vs_human_raw_data\n"
        f"with sigterm_exits_cleanly(): download_model_vs_human_raw_data('colour', {str(destination)!r}, "
        "progress=False, retries=0)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MODELVAL_MIRROR": mirror}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.time() + 60
    while time.time() < deadline and not list(destination.rglob("*.part")):
        time.sleep(0.05)
    assert list(destination.rglob("*.part")), "the download never started"
    time.sleep(0.3)  # the first bytes are written
    return process


@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_human_data_download_leaves_nothing(kill, tmp_path, local_server, modelval_reference_dir,
                                                     monkeypatch):  # fmt: skip
    from modelval.datasets.human_data import download_model_vs_human_raw_data

    destination = tmp_path / "raw-data"
    server = SlowServer()  # any path: announces 10 MB, sends 64 KB, stalls
    try:
        process = _start(destination, server.url.rsplit("/", 1)[0])
        process.send_signal(kill)
        process.wait(timeout=30)
    finally:
        server.close()
    left = sorted(p.relative_to(destination).as_posix() for p in destination.rglob("*"))
    if kill == signal.SIGTERM:
        assert left == []  # the staging folder went with the process
        return
    staged = [p for p in destination.iterdir() if p.is_dir()]
    assert len(staged) == 1 and staged[0].name.startswith(".colour.modelval-staging")  # marked as modelval's
    published = Path(modelval_reference_dir).parent / "model-vs-human" / "raw-data" / "colour"
    for path in sorted(published.glob("*.csv")):  # the published files, from a mirror on this machine
        local_server.add(f"/model-vs-human/raw-data/colour/{path.name}", path.read_bytes())
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    download_model_vs_human_raw_data("colour", destination, progress=False)
    assert sorted(p.name for p in destination.iterdir()) == ["colour"]  # the killed one's staging folder is gone
    assert not list(destination.rglob("*.part"))
