"""Archives of stimuli are checked from their member list before anything is written; downloads stage in
folders only modelval makes and removes (issue 31: 6, 7 and 9).

A decompression bomb is refused from its headers; a hidden folder beside the category folders
(``.pytest_cache/``, ``.DS_Store``) is ignored, as ``verify-data`` ignores it in a folder; the user's own
``.<destination>.*`` folders beside a download survive it.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from modelval.datasets import discover_stimuli, download_stimuli, verify_stimuli
from modelval.datasets.release import ArchiveLimits, read_record, record_path, safe_extract
from modelval.download import STAGING_MARKER, sha256_of
from modelval.errors import DataError
from test_download_interrupted import SlowServer  # announces 10 MB, sends 64 KB, stalls

ROOT = Path(__file__).resolve().parents[2]


def _subset(modelval_data_root: Path, tmp_path: Path, per_category: int = 2) -> tuple[Path, dict[str, str]]:
    """The first ``per_category`` published stimuli of each of the 16 categories, with their manifest."""
    root = tmp_path / "subset" / "cue-conflict"
    manifest = {}
    for category in sorted(p.name for p in modelval_data_root.iterdir() if p.is_dir()):
        for path in sorted((modelval_data_root / category).iterdir())[:per_category]:
            (root / category).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, root / category / path.name)
            manifest[f"{category}/{path.name}"] = sha256_of(path)
    return root, manifest


def _tar_gz(add) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        add(tar)
    return buffer.getvalue()


def _zeros(tar: tarfile.TarFile, name: str, size: int) -> None:
    """A member of ``size`` zero bytes: a few KB once compressed, ``size`` bytes once extracted."""

    class Zeros:
        left = size

        def read(self, count: int = -1) -> bytes:
            count = self.left if count < 0 else min(count, self.left)
            self.left -= count
            return bytes(count)

    info = tarfile.TarInfo(name)
    info.size = size
    tar.addfile(info, Zeros())  # type: ignore[arg-type]


def test_a_hidden_folder_in_a_complete_archive_is_ignored(modelval_data_root, local_server, tmp_path):
    """Today's code refused this archive: "no cue-conflict category folders (airplane/ ... truck/)"."""
    root, manifest = _subset(modelval_data_root, tmp_path)
    (root / ".pytest_cache" / "v").mkdir(parents=True)
    (root / ".pytest_cache" / "v" / "lastfailed").write_text("{}")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "bear" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "README.md").write_text("the cue-conflict stimuli")
    verify_stimuli(root, manifest)  # the folder itself passes
    url = local_server.add("/cue-conflict.tar.gz", _tar_gz(lambda tar: tar.add(root, arcname="cue-conflict")))
    destination = tmp_path / "out" / "cue-conflict"
    assert download_stimuli(destination, url=url, manifest=manifest, progress=False) == destination
    assert len(discover_stimuli(destination, expected_count=None)) == 32
    assert not list(destination.rglob(".*")) and not (destination / "README.md").exists()  # only the images


def test_a_decompression_bomb_is_refused_from_its_headers(local_server, tmp_path):
    """A member declaring 64 MB (a few KB compressed) among the cue-conflict images: refused, nothing written.

    Today's code extracted it first (the issue's 3 MB archive wrote 3.2 GB before it was refused)."""
    archive = _tar_gz(lambda tar: _zeros(tar, "cue-conflict/airplane/airplane1-bicycle2.png", 64 << 20))
    assert len(archive) < 400_000  # 64 MB in 0.3 MB
    url = local_server.add("/cue-conflict.tar.gz", archive)
    destination = tmp_path / "out" / "cue-conflict"
    with pytest.raises(DataError, match=r"declares 67108864 bytes, more than any cue-conflict image may have"):
        download_stimuli(destination, url=url, progress=False)  # the committed manifest: the set's known size
    assert sorted(p.name for p in destination.parent.iterdir()) == []  # the staging folder is gone too


def test_many_small_members_are_refused_by_their_count_and_total(tmp_path):
    def add(tar: tarfile.TarFile) -> None:
        for index in range(12):
            _zeros(tar, f"set/airplane/{index}.png", 1000)

    archive = tmp_path / "many.tar.gz"
    archive.write_bytes(_tar_gz(add))
    with pytest.raises(DataError, match=r"more than 10 files, but the toy set has 10 images"):
        safe_extract(archive, tmp_path / "a", limits=ArchiveLimits("toy", 10, 100_000))
    with pytest.raises(DataError, match=r"its files declare more than 5000 bytes"):
        safe_extract(archive, tmp_path / "b", limits=ArchiveLimits("toy", 20, 5000))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert len(safe_extract(archive, tmp_path / "c", limits=ArchiveLimits("toy", 12, 12_000))) == 12


def test_a_member_twice_is_refused(tmp_path):
    def add(tar: tarfile.TarFile) -> None:
        _zeros(tar, "set/airplane/1.png", 10)
        _zeros(tar, "./set/airplane/1.png", 20)

    archive = tmp_path / "twice.tar.gz"
    archive.write_bytes(_tar_gz(add))
    with pytest.raises(DataError, match="appears twice in the archive"):
        safe_extract(archive, tmp_path / "out")


def test_a_bomb_in_a_release_archive_is_refused_before_anything_is_written(monkeypatch, tmp_path, local_server):
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    name = "colour/dnn/session-1/0001_cl_dnn_bw_oven_40_n04111531_14126.png"
    archive = _tar_gz(lambda tar: _zeros(tar, name, 8 << 20))
    local_server.add("/colour.tar.gz", archive)
    destination = tmp_path / "data" / "colour"
    with pytest.raises(DataError, match=r"declares 8388608 bytes, more than any colour image may have"):
        download_stimuli(destination, dataset="colour", progress=False)
    assert list(destination.parent.iterdir()) == [] and read_record("colour") is None


def _marked(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and (p / STAGING_MARKER).is_file()]


def test_the_users_own_dot_folders_beside_the_destination_survive_a_download(
    modelval_data_root, local_server, tmp_path
):
    """Today's code removed every folder named ``.<destination>.*`` beside it as a "leftover"."""
    root, manifest = _subset(modelval_data_root, tmp_path, per_category=1)
    url = local_server.add("/cue-conflict.tar.gz", _tar_gz(lambda tar: tar.add(root, arcname="cue-conflict")))
    data = tmp_path / "data"
    mine = [data / name for name in (".cue-conflict.backup", ".cue-conflict.2024", ".cue-conflict.modelval-staging-x")]
    for folder in mine:
        folder.mkdir(parents=True)
        (folder / "notes.txt").write_text("my own work")
    download_stimuli(data / "cue-conflict", url=url, manifest=manifest, progress=False)
    for folder in mine:  # the last has modelval's name but not its marker file: not modelval's either
        assert (folder / "notes.txt").read_text() == "my own work"
    assert sorted(p.name for p in data.iterdir()) == sorted(["cue-conflict", *(p.name for p in mine)])


def test_a_killed_release_download_is_cleaned_up_by_the_next(monkeypatch, tmp_path, local_server):
    """SIGKILL during the model-vs-human release download: its staging folder (and .part file) stays; the next
    fetch removes it. Today's release path never removed it."""
    cache = tmp_path / "cache"
    destination = tmp_path / "data" / "colour"
    server = SlowServer()
    try:
        code = (
            "from modelval.datasets.fetch import download_stimuli\n"
            f"download_stimuli({str(destination)!r}, dataset='colour', progress=False)"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MODELVAL_CACHE_DIR": str(cache),
               "MODELVAL_MIRROR": server.url}  # fmt: skip
        process = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and not list(destination.parent.glob(".colour.*/*.part")):
            time.sleep(0.05)
        process.kill()
        process.wait(timeout=20)
    finally:
        server.close()
    left = [p for p in destination.parent.iterdir() if p.name.startswith(".colour.")]
    assert len(left) == 1 and list(left[0].glob("*.part"))  # what SIGKILL leaves
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(cache))
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    local_server.add("/colour.tar.gz", b"not an archive")
    with pytest.raises(DataError, match="not a readable tar archive"):
        download_stimuli(destination, dataset="colour", progress=False)  # the next fetch, failing for its own reason
    assert list(destination.parent.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("[]", "a JSON list, not an object"),
        ('{"url": "u", "fetched": "t", "archive_sha256": "abc", "files": {}}', "is not a SHA-256 digest"),
        ('{"url": "u", "fetched": "t", "files": {}}', "no text field 'archive_sha256'"),
        ('{"url": "u", "fetched": "t", "archive_sha256": "' + "a" * 64 + '", "files": [1]}', "'files' is not a map"),
    ],
)
def test_a_corrupt_release_record_is_one_line_exit_2(monkeypatch, tmp_path, local_server, capsys, content, why):
    """Today: exit 3, ``unexpected error: KeyError: 'archive_sha256'`` (or TypeError), after the download."""
    from modelval.cli import main

    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    local_server.add("/colour.tar.gz", b"an archive")
    path = record_path("colour")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert main(["data", "download", "--dataset", "colour", "--data-root", str(tmp_path / "colour")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("modelval: error: ") and why in err and "--force" in err
