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


def test_a_trickling_server_cannot_hold_a_download_forever(local_server, tmp_path):
    """One byte every 0.3 s never trips a 1 s read timeout; the whole transfer is bounded all the same."""
    import time

    url = local_server.add("/slow.tar.gz", BODY[:40], mode="trickle", interval=0.3)  # 12 s if never cut
    start = time.monotonic()
    with pytest.raises(DownloadError, match=r"after 2 attempts: .*bytes/s \(a stalled transfer\)"):
        download_file(url, tmp_path / "slow.tar.gz", timeout=1.0, retries=1, progress=False, sleep=no_sleep)
    assert time.monotonic() - start < 5  # two attempts of about one window each
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"timeout": 0}, "timeout must be a finite number of seconds above 0, got 0"),
        ({"timeout": float("nan")}, "above 0, got nan"),
        ({"timeout": -1.0}, "above 0, got -1.0"),
        ({"timeout": float("inf")}, "above 0, got inf"),
        ({"backoff": -0.5}, "backoff must be a finite number of seconds >= 0, got -0.5"),
        ({"retries": -1}, "retries must be a whole number >= 0, got -1"),
    ],
)
def test_impossible_transfer_settings_are_refused_before_anything_starts(settings, message, tmp_path):
    from modelval.errors import InputValidationError

    with pytest.raises(InputValidationError, match=message):
        download_file("http://127.0.0.1:9/x.bin", tmp_path / "x.bin", progress=False, **settings)
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("what", ["stimuli", "humans"])
def test_download_data_honours_offline(what, local_server, tmp_path, monkeypatch, capsys):
    from modelval.cli import main

    local_server.add("/cue-conflict.tar.gz", BODY)
    monkeypatch.setenv("MODELVAL_MIRROR", local_server.url)
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    argv = ["data", "download", "--data-root", str(tmp_path / "data"), *(["--humans"] if what == "humans" else [])]
    assert main(argv) == 2
    assert "this run is offline" in capsys.readouterr().err
    monkeypatch.delenv("MODELVAL_OFFLINE")
    assert main([*argv, "--offline"]) == 2
    assert local_server.requests == {} and leftovers(tmp_path) == []


# --- the network named as the network ------------------------------------------------------------------------

UNRESOLVABLE = "http://nonexistent.invalid/weights.bin"  # .invalid never resolves (RFC 6761)


def test_a_host_that_does_not_resolve_is_the_network_at_once_without_retries(tmp_path):
    """Was: 4 attempts with backoff, then "connection failed (ConnectionError: ...)"."""
    import time

    from modelval.errors import NetworkError

    slept = []
    started = time.monotonic()
    with pytest.raises(NetworkError) as error:
        download_file(UNRESOLVABLE, tmp_path / "w.bin", retries=3, progress=False, sleep=slept.append)
    assert time.monotonic() - started < 10 and slept == []
    assert "could not reach nonexistent.invalid (network): could not resolve the host name" in str(error.value)
    assert leftovers(tmp_path) == []


def test_check_reachable_names_the_host_and_why(closed_port_url, local_server):
    from modelval.download import check_reachable
    from modelval.errors import NetworkError

    with pytest.raises(NetworkError, match=r"could not reach nonexistent.invalid \(network\): could not resolve"):
        check_reachable(UNRESOLVABLE, advice="use a local file")
    with pytest.raises(NetworkError, match=r"could not reach 127.0.0.1 \(network\): connection refused; do this"):
        check_reachable(closed_port_url, advice="do this")
    check_reachable(local_server.url)  # a server that answers: nothing to say


def test_check_reachable_leaves_a_proxied_host_to_the_proxy(monkeypatch):
    from modelval.download import check_reachable

    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    check_reachable(UNRESOLVABLE)  # the proxy resolves names, not this machine


def test_network_cause_reads_a_wrapped_chain():
    """huggingface_hub wraps the resolver's error in LocalEntryNotFoundError("cannot find the requested files")."""
    import socket

    from modelval.download import network_cause

    def chained(outer: Exception, inner: BaseException) -> Exception:
        outer.__cause__ = inner
        return outer

    unresolved = socket.gaierror(-2, "Name or service not known")
    offline = chained(FileNotFoundError("cannot find the requested files"), unresolved)
    assert network_cause(offline) == "could not resolve the host name (Name or service not known)"
    assert network_cause(chained(OSError("x"), ConnectionRefusedError(111, "refused"))) == "connection refused"
    assert network_cause(FileNotFoundError("the repository has no such file")) is None
