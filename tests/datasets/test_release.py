"""model-vs-human's 14 further sets: fetched on request from archives in the release layout, checked, recorded.

The archives are built here in the exact layout and naming (tests/release_archives.py) and served from
127.0.0.1 through ``MODELVAL_MIRROR``; the real stimuli are ImageNet-derived and never redistributed.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from modelval.cli import main
from modelval.datasets.fetch import ensure_stimuli
from modelval.datasets.human_data import download_model_vs_human_raw_data, human_data_dir
from modelval.datasets.registry import get_dataset
from modelval.datasets.release import _write_record, check_structure, read_record, record_path, safe_extract
from modelval.datasets.stimuli import discover_stimuli
from modelval.download import sha256_of
from modelval.errors import ChecksumError, DataError
from release_archives import build_release_archive, plain_png, release_names


@pytest.fixture
def mirror(tmp_path, monkeypatch, local_server):
    """An empty user cache and a data mirror on 127.0.0.1; returns the server."""
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    for name in ("MODELVAL_DATA_HOME", "MODELVAL_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    return local_server


@pytest.fixture
def colour_archive(tmp_path, model_vs_human_raw_data) -> Path:
    """colour.tar.gz in the release layout: 1280 images, 640 per condition, plain 224x224 PNGs."""
    names = release_names(model_vs_human_raw_data, "colour")
    return build_release_archive(tmp_path / "colour.tar.gz", "colour", names, lambda i, c: plain_png((i % 251, 60, 90)))


def test_download_checks_structure_records_the_archive_and_shows_the_licence_once(mirror, colour_archive, capsys):
    mirror.add("/colour.tar.gz", colour_archive.read_bytes())
    assert main(["data", "download", "--dataset", "colour"]) == 0
    out, err = capsys.readouterr()
    assert "ImageNet terms of access" in err and "shown once" in err
    assert "stimuli ready at" in out and "verified: every file matches the first fetch" in out
    record = read_record("colour")
    assert record is not None and record["archive_sha256"] == sha256_of(colour_archive)
    assert record["url"] == f"{mirror.url}/colour.tar.gz" and len(record["files"]) == 1280
    root = Path(out.split(" at ", 1)[1].split(":", 1)[0])
    stimuli = discover_stimuli(root, dataset="colour")
    assert len(stimuli) == 1280 and all(s.relpath.startswith("dnn/session-1/") for s in stimuli)
    assert {s.shape for s in stimuli} == {s.texture for s in stimuli}  # no cue conflict: shape = category
    # again, forced: the same archive is accepted, and the licence is named in one line, not repeated in full
    assert main(["data", "download", "--dataset", "colour", "--force"]) == 0
    err = capsys.readouterr().err
    assert "shown in full at the first fetch" in err and "shown once" not in err
    assert main(["data", "verify", "--dataset", "colour"]) == 0
    assert "verified" in capsys.readouterr().out


def test_a_later_copy_that_differs_is_refused_and_the_first_stays(
    mirror, colour_archive, tmp_path, capsys, model_vs_human_raw_data
):
    mirror.add("/colour.tar.gz", colour_archive.read_bytes())
    assert main(["data", "download", "--dataset", "colour"]) == 0
    capsys.readouterr()
    names = release_names(model_vs_human_raw_data, "colour")
    other = build_release_archive(tmp_path / "other.tar.gz", "colour", names, lambda i, c: plain_png((i % 251, 61, 90)))
    mirror.add("/colour.tar.gz", other.read_bytes())
    assert main(["data", "download", "--dataset", "colour", "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].endswith("(shown in full at the first fetch)") and len(err) == 2
    assert err[1].startswith("modelval: error: the colour archive from") and "refuses a different one" in err[1]
    assert str(record_path("colour")) in err[1]
    assert main(["data", "verify", "--dataset", "colour"]) == 0  # the first copy is untouched


def test_an_edited_image_is_caught_against_the_first_fetch(mirror, colour_archive, capsys):
    mirror.add("/colour.tar.gz", colour_archive.read_bytes())
    assert main(["data", "download", "--dataset", "colour"]) == 0
    root = Path(capsys.readouterr().out.split(" at ", 1)[1].split(":", 1)[0])
    victim = sorted((root / "dnn" / "session-1").iterdir())[5]
    victim.write_bytes(plain_png((1, 2, 3)))
    assert main(["data", "verify", "--dataset", "colour"]) == 2
    err = capsys.readouterr().err
    assert "differs from the colour set first fetched" in err and victim.name in err


def test_never_fetched_behind_the_users_back(mirror, colour_archive):
    mirror.add("/colour.tar.gz", colour_archive.read_bytes())
    with pytest.raises(
        DataError, match=r"never fetched behind your back: run `modelval data download --dataset colour`"
    ):
        ensure_stimuli(dataset="colour")
    assert mirror.requests == {}


@pytest.mark.parametrize(
    ("why", "change"),
    [
        ("found 1279 images, expected 1280", lambda names: names[1:]),
        (
            "expected 640 images in each condition, found cr: 641, bw: 639",
            lambda names: [
                (n.replace("_bw_", "_cr_", 1) if i == 0 else n, c)
                for i, (n, c) in enumerate(sorted(names, key=lambda x: "_bw_" not in x[0]))
            ],
        ),
        ("cannot parse image name", lambda names: [(n.replace("_cl_", "_xx_"), c) for n, c in names]),
        (
            "condition 'grey' is not one of the colour conditions",
            lambda names: [(n.replace("_bw_", "_grey_"), c) for n, c in names],
        ),
    ],
)
def test_wrong_structure_or_counts_are_refused(mirror, tmp_path, model_vs_human_raw_data, why, change, capsys):
    names = change(release_names(model_vs_human_raw_data, "colour"))
    archive = build_release_archive(tmp_path / "bad.tar.gz", "colour", names, lambda i, c: plain_png())
    mirror.add("/colour.tar.gz", archive.read_bytes())
    assert main(["data", "download", "--dataset", "colour"]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 2  # the licence notice, then the one-line error
    assert read_record("colour") is None  # nothing recorded from a copy that failed its checks
    assert not (tmp_path / "cache" / "colour").exists()


def _hostile(path: Path, member: tarfile.TarInfo, data: bytes = b"x") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        ok = tarfile.TarInfo("colour/dnn/session-1/0001_cl_dnn_bw_oven_40_n04111531_14126.png")
        ok.size = len(data)
        tar.addfile(ok, io.BytesIO(data))
        if member.isfile():
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
        else:
            tar.addfile(member)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (_member("/tmp/modelval-evil.png"), "has an absolute path"),
        (_member("colour/../../modelval-evil.png"), "has a '..' part"),
        (_member("colour/dnn/session-1/link.png", tarfile.SYMTYPE, "/etc/passwd"), "is a link"),
        (_member("colour/dnn/session-1/up.png", tarfile.SYMTYPE, "../../../outside"), "is a link"),
        (_member("colour/dnn/session-1/hard.png", tarfile.LNKTYPE, "../../etc/hosts"), "is a link"),
        (_member("colour/dnn/session-1/fifo", tarfile.FIFOTYPE), "neither a file nor a folder"),
    ],
)
def test_hostile_archives_are_refused_before_anything_is_written(tmp_path, member, why):
    archive = _hostile(tmp_path / "evil.tar.gz", member)
    target = tmp_path / "deep" / "target"
    with pytest.raises(DataError, match=why):
        safe_extract(archive, target)
    assert not target.exists()  # refused before the first member was written
    assert not (tmp_path / "modelval-evil.png").exists() and not Path("/tmp/modelval-evil.png").exists()


def test_hostile_archive_through_the_command_is_one_line(mirror, tmp_path, capsys):
    archive = _hostile(tmp_path / "evil.tar.gz", _member("colour/../../escaped.png"))
    mirror.add("/colour.tar.gz", archive.read_bytes())
    assert main(["data", "download", "--dataset", "colour"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("modelval: error: ") and "refused: member 'colour/../../escaped.png'" in err[-1]
    assert not list(tmp_path.rglob("escaped.png"))


def test_the_first_record_stands_when_two_fetches_race(mirror):
    first = _write_record("sketch", {"archive_sha256": "a" * 64, "files": {}, "fetched": "t1", "url": "u"})
    second = _write_record("sketch", {"archive_sha256": "b" * 64, "files": {}, "fetched": "t2", "url": "u"})
    assert first["archive_sha256"] == second["archive_sha256"] == "a" * 64
    assert json.loads(record_path("sketch").read_text())["fetched"] == "t1"
    assert not [p for p in record_path("sketch").parent.iterdir() if p.name.startswith(".")]  # no temporary left


def test_entries_of_the_further_sets():
    for name, images in (("colour", 1280), ("phase-scrambling", 1120), ("sketch", 800), ("stylized", 800)):
        entry = get_dataset(name)
        assert (entry.images, entry.manifest, entry.layout, entry.fetch_on_request) == (images, None, "sessions", True)
        assert entry.archive_url == f"https://github.com/bethgelab/model-vs-human/releases/download/v0.1/{name}.tar.gz"
    assert get_dataset("sketch").license.startswith("MIT")
    assert get_dataset("rotation").license.startswith("ImageNet terms")
    with pytest.raises(DataError, match="has no file-by-file source"):
        from modelval.datasets.fetch import source_url

        source_url("texture-vs-shape", "rotation")


def test_check_structure_names_the_condition_counts(model_vs_human_raw_data):
    names = [f"dnn/session-1/{n}" for n, _ in release_names(model_vs_human_raw_data, "rotation")]
    check_structure(names, "rotation")
    with pytest.raises(DataError, match="found 1279 images, expected 1280"):
        check_structure(names[:-1], "rotation")


def test_model_vs_human_human_data_through_the_mirror(mirror, model_vs_human_raw_data, tmp_path):
    for path in sorted((model_vs_human_raw_data / "sketch").glob("*.csv")):
        mirror.add(f"/model-vs-human/raw-data/sketch/{path.name}", path.read_bytes())
    root = download_model_vs_human_raw_data("sketch", progress=False)
    assert sorted(p.name for p in (root / "sketch").iterdir()) == sorted(
        p.name for p in (model_vs_human_raw_data / "sketch").glob("*.csv")
    )
    assert human_data_dir("sketch") == root  # found in the user cache without any setting
    # a corrupted copy on the mirror is refused against the committed SHA-256, and nothing lands
    bad = sorted((model_vs_human_raw_data / "stylized").glob("*.csv"))
    for path in bad:
        mirror.add(f"/model-vs-human/raw-data/stylized/{path.name}", path.read_bytes().replace(b"dog", b"cat", 1))
    with pytest.raises(ChecksumError):
        download_model_vs_human_raw_data("stylized", progress=False, retries=1)
    assert not (root / "stylized").exists()


def test_missing_human_data_names_where_it_looked_and_how_to_fetch(mirror, monkeypatch, tmp_path):
    with pytest.raises(
        DataError, match=r"human raw data of uniform-noise not found .*data download --humans --dataset uniform-noise"
    ):
        human_data_dir("uniform-noise")
    with pytest.raises(DataError, match=r"not found \(looked in .*\): run `modelval data download --humans`, or"):
        human_data_dir("edges", tmp_path)
