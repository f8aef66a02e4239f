"""A download killed half-way leaves nothing behind: SIGTERM removes the temporary file, and the
next download removes the ``.part`` files of a killed (SIGKILL) one once they are a day old."""

from __future__ import annotations

import hashlib
import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from modelval.download import STALE_PART_SECONDS, download_file, remove_stale_parts

ROOT = Path(__file__).resolve().parents[1]


class SlowServer:
    """Announces 10 MB, sends 64 KB, then stalls: a download that is surely in progress when killed."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(10_000_000))
                self.end_headers()
                self.wfile.write(b"x" * 65536)
                self.wfile.flush()
                time.sleep(30)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/weights.pth"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def start_download(url: str, destination: Path) -> subprocess.Popen:
    code = (
        "from modelval.download import download_file, sigterm_exits_cleanly\n"
        f"with sigterm_exits_cleanly(): download_file({url!r}, {str(destination)!r}, progress=False)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.time() + 30
    while time.time() < deadline and not list(destination.parent.glob(".*.part")):
        time.sleep(0.05)
    time.sleep(0.3)  # the first bytes are written
    return process


def test_sigterm_removes_the_partial_file(tmp_path):
    server = SlowServer()
    try:
        destination = tmp_path / "weights.pth"
        process = start_download(server.url, destination)
        assert list(tmp_path.glob(".*.part")), "the download never started"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 128 + signal.SIGTERM
        assert list(tmp_path.iterdir()) == []
    finally:
        server.close()


def test_a_library_download_leaves_the_signal_handlers_alone(tmp_path, local_server):
    """Signal handlers belong to the user's process: download_file installs none (the CLI opts in)."""
    import signal as signals

    from modelval.download import download_file

    url = local_server.add("/w.bin", b"abc")
    seen = []
    original = signals.signal

    def spy(signum, handler):
        seen.append(signum)
        return original(signum, handler)

    signals.signal = spy  # type: ignore[assignment]
    try:
        download_file(url, tmp_path / "w.bin", progress=False)
    finally:
        signals.signal = original  # type: ignore[assignment]
    assert seen == []
    assert (tmp_path / "w.bin").read_bytes() == b"abc"


def test_parts_of_a_killed_download_are_removed_after_a_day(tmp_path, local_server):
    server = SlowServer()
    try:
        destination = tmp_path / "weights.pth"
        process = start_download(server.url, destination)
        process.kill()  # SIGKILL: no handler runs
        process.wait(timeout=20)
        leftovers = list(tmp_path.glob(".*.part"))
        assert len(leftovers) == 1
    finally:
        server.close()
    assert remove_stale_parts(destination) == []  # young: it could be another process's live download
    old = time.time() - STALE_PART_SECONDS - 60
    os.utime(leftovers[0], (old, old))
    url = local_server.add("/weights.pth", b"real weights")
    download_file(url, destination, progress=False)  # the next fetch cleans up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights.pth"]


def test_staging_folders_of_a_killed_stimulus_download_are_removed_by_the_next_one(tmp_path, local_server):
    """A SIGKILLed download-data leaves its hidden staging folder (204 MB for the archive); the next removes it."""
    import io
    import tarfile

    from modelval.datasets.fetch import download_stimuli

    destination = tmp_path / "cue-conflict"
    server = SlowServer()
    try:
        code = (
            "from modelval.datasets.fetch import download_stimuli\n"
            f"download_stimuli({str(destination)!r}, url={server.url!r}, progress=False)"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        process = subprocess.Popen([sys.executable, "-c", code], env=env)
        deadline = time.time() + 30
        while time.time() < deadline and not list(tmp_path.glob(".cue-conflict.*/*.part")):
            time.sleep(0.05)
        process.kill()
        process.wait(timeout=20)
    finally:
        server.close()
    staged = [p for p in tmp_path.glob(".cue-conflict.*") if p.is_dir()]
    assert len(staged) == 1 and list(staged[0].glob("*.part"))  # what today's code left forever
    image = tmp_path / "airplane1-bicycle2.png"
    image.write_bytes(b"\x89PNG not really, the manifest below says what it must be")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(image, arcname="cue-conflict/airplane/airplane1-bicycle2.png")
    url = local_server.add("/cue-conflict.tar.gz", buffer.getvalue())
    manifest = {"airplane/airplane1-bicycle2.png": hashlib.sha256(image.read_bytes()).hexdigest()}
    download_stimuli(destination, url=url, manifest=manifest, progress=False)
    image.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cue-conflict"]
