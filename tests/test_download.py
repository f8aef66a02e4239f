"""The atomic downloader against a real HTTP server on 127.0.0.1."""

import hashlib

import pytest

from modelval.download import download_file, hash_prefix_from_filename, verify_sha256
from modelval.errors import ChecksumError, DownloadError

BODY = bytes(range(256)) * 4096  # 1 MiB
DIGEST = hashlib.sha256(BODY).hexdigest()


def no_sleep(_seconds: float) -> None:
    pass


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


def test_downloads_and_verifies_full_hash(local_server, tmp_path):
    url = local_server.add("/weights.bin", BODY)
    path = download_file(url, tmp_path / "weights.bin", sha256=DIGEST, progress=False)
    assert path.read_bytes() == BODY
    assert leftovers(tmp_path) == ["weights.bin"]


def test_hash_prefix_convention(local_server, tmp_path):
    name = f"model-{DIGEST[:8]}.pth"
    assert hash_prefix_from_filename(name) == DIGEST[:8]
    assert hash_prefix_from_filename("resnet50-0676ba61.pth") == "0676ba61"
    assert hash_prefix_from_filename("model.pth") is None
    url = local_server.add(f"/{name}", BODY)
    download_file(url, tmp_path / name, sha256_prefix=DIGEST[:8], progress=False)
    assert (tmp_path / name).read_bytes() == BODY


def test_wrong_hash_is_an_error_and_leaves_no_file(local_server, tmp_path):
    url = local_server.add("/model-deadbeef.pth", BODY)
    with pytest.raises(ChecksumError, match=r"expected prefix deadbeef"):
        download_file(url, tmp_path / "model-deadbeef.pth", sha256_prefix="deadbeef", progress=False)
    assert leftovers(tmp_path) == []


def test_truncated_body_is_retried_then_fails_without_a_half_file(local_server, tmp_path):
    url = local_server.add("/big.bin", BODY, mode="truncate")
    with pytest.raises(DownloadError, match="after 3 attempts"):
        download_file(url, tmp_path / "big.bin", retries=2, progress=False, sleep=no_sleep)
    assert local_server.requests["/big.bin"] == 3
    assert leftovers(tmp_path) == []


def test_server_errors_are_retried_with_backoff(local_server, tmp_path):
    waits = []
    url = local_server.add("/flaky.bin", BODY, failures=2)
    download_file(url, tmp_path / "flaky.bin", retries=3, backoff=0.5, progress=False, sleep=waits.append)
    assert waits == [0.5, 1.0]
    assert (tmp_path / "flaky.bin").read_bytes() == BODY


def test_missing_file_is_final_not_retried(local_server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download_file(local_server.url + "/nope.bin", tmp_path / "nope.bin", progress=False, sleep=no_sleep)
    assert local_server.requests["/nope.bin"] == 1
    assert leftovers(tmp_path) == []


def test_connection_refused_is_a_clear_error(closed_port_url, tmp_path):
    with pytest.raises(DownloadError, match="connection failed"):
        download_file(closed_port_url, tmp_path / "x.pth", retries=1, progress=False, sleep=no_sleep)
    assert leftovers(tmp_path) == []


def test_existing_file_survives_a_failed_redownload(local_server, tmp_path):
    target = tmp_path / "keep.bin"
    target.write_bytes(b"good old file")
    url = local_server.add("/keep.bin", BODY)
    with pytest.raises(ChecksumError):
        download_file(url, target, sha256="0" * 64, progress=False)
    assert target.read_bytes() == b"good old file"


def test_verify_sha256_names_the_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert verify_sha256(path, sha256=hashlib.sha256(b"abc").hexdigest())
    with pytest.raises(ChecksumError, match=r"f\.bin"):
        verify_sha256(path, sha256="1" * 64)
