"""Bad input loses nothing: every file a command writes appears whole or not at all (modelval.atomic).

A full disk is simulated where the bytes go: the temporary file every writer fills takes 8 bytes, then
fails with ENOSPC (``OSError(errno.ENOSPC, ...)``) as a real full disk does, mid-write or at the final
flush. Each command must then exit 2 with one line naming the file, leave no temporary file behind, and
leave a file that was there before exactly as it was.
"""

from __future__ import annotations

import errno
import io
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from modelval.cli import main

RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
VGG_EDGES = "edge-experiment_vgg_session_1.csv"

NETS = """
import torch


def untrained():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
"""

MODELS = """
[models.random]
label = "an untrained network"
spec = "nets.py:untrained"
normalizations = ["model"]
"""


class FullDisk(io.RawIOBase):
    """A file that takes ``budget`` bytes and then fails as a full disk does."""

    def __init__(self, path: Path, budget: int) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.budget = budget

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        if self.budget <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        chunk = bytes(data[: self.budget])
        self.file.write(chunk)
        self.file.flush()
        self.budget -= len(chunk)
        return len(chunk)

    def close(self) -> None:
        self.file.close()
        super().close()


@pytest.fixture
def full_disk(monkeypatch):
    from modelval import atomic

    real = atomic._temporary_file

    def temporary(path: Path):
        name, handle = real(path)
        handle.close()
        return name, io.BufferedWriter(FullDisk(name, 8))

    monkeypatch.setattr(atomic, "_temporary_file", temporary)


@pytest.fixture
def work(tmp_path, stimulus_subset, modelval_reference_dir) -> dict[str, Path]:
    """Inputs for every writer: decision files, predictions, logits, a tiny model and a models file."""
    (tmp_path / "nets.py").write_text(NETS)
    (tmp_path / "modelval.toml").write_text(MODELS)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 60)
    np.savez(tmp_path / "logits.npz", logits=rng.normal(size=(60, 3)) * 3, labels=labels)
    rows = [{"label": int(y), "pred": int(rng.integers(0, 3)), "conf": float(rng.uniform(0.3, 1))} for y in labels]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    out.mkdir()
    return {
        "root": tmp_path,
        "out": out,
        "resnet": modelval_reference_dir / RESNET,
        "edges": modelval_reference_dir / VGG_EDGES,
        "reference": modelval_reference_dir,
        "subset": stimulus_subset(2),
    }


def _model(w: dict[str, Path]) -> list[str]:
    return [
        "--model",
        f"{w['root'] / 'nets.py'}:untrained",
        "--data-root",
        str(w["subset"]),
        "--allow-modified-stimuli",
    ]


#: name -> (argv, the file the failing write targets)
WRITERS: dict[str, Callable[[dict[str, Path]], tuple[list[str], Path]]] = {
    "shape-bias --decisions-out": lambda w: (
        ["shape-bias", *_model(w), "--decisions-out", str(w["out"] / "d.csv")],
        w["out"] / "d.csv",
    ),
    "shape-bias --out": lambda w: (
        ["shape-bias", "--decisions", str(w["resnet"]), "--out", str(w["out"] / "f.png")],
        w["out"] / "f.png",
    ),
    "shape-bias --report-dir": lambda w: (
        ["shape-bias", "--decisions", str(w["resnet"]), "--report-dir", str(w["out"])],
        w["out"] / "shape-bias-per-category.png",
    ),
    "accuracy --decisions-out": lambda w: (
        ["accuracy", *_model(w), "--decisions-out", str(w["out"] / "d.csv")],
        w["out"] / "d.csv",
    ),
    "compare --report-dir": lambda w: (
        ["compare", str(w["resnet"]), str(w["resnet"]), "--bootstrap", "0", "--report-dir", str(w["out"])],
        w["out"] / "compare-cue-conflict.png",
    ),
    "compare --out": lambda w: (
        ["compare", str(w["resnet"]), str(w["resnet"]), "--bootstrap", "0", "--out", str(w["out"] / "c.pdf")],
        w["out"] / "c.pdf",
    ),
    "humans --report-dir": lambda w: (
        ["humans", "--decisions", str(w["edges"]), "--bootstrap", "0", "--report-dir", str(w["out"])],
        w["out"] / "error-consistency-edges.png",
    ),
    "humans (several) --report-dir": lambda w: (
        ["humans", "--decisions", f"a={w['edges']}", "--decisions", f"b={w['edges']}", "--bootstrap", "0",
         "--report-dir", str(w["out"])],
        w["out"] / "accuracy-by-dataset.png",
    ),
    "baseline save --out": lambda w: (
        ["baseline", "save", *_model(w), "--out", str(w["out"] / "b.json")],
        w["out"] / "b.json",
    ),
    "calibration --report-dir": lambda w: (
        ["calibration", "card", str(w["root"] / "logits.npz"), "--bootstrap", "0", "--report-dir", str(w["out"])],
        w["out"] / "reliability.png",
    ),
    "reliability --out": lambda w: (
        ["calibration", "reliability", str(w["root"] / "preds.jsonl"), "--bootstrap", "0", "--out",
         str(w["out"] / "r.svg")],
        w["out"] / "r.svg",
    ),
    "temperature --out": lambda w: (
        [
            "calibration",
            "temperature",
            "--val",
            str(w["root"] / "logits.npz"),
            "--test",
            str(w["root"] / "logits.npz"),
            "--out",
            str(w["out"] / "t.png"),
        ],
        w["out"] / "t.png",
    ),
    "ece --csv": lambda w: (
        ["calibration", "ece", str(w["root"] / "preds.jsonl"), "--bootstrap", "0", "--csv", str(w["out"] / "e.csv")],
        w["out"] / "e.csv",
    ),
    "validate --report-dir": lambda w: (
        [
            "validate",
            "--models-file",
            str(w["root"] / "modelval.toml"),
            "--data-root",
            str(w["subset"]),
            "--allow-modified-stimuli",
            "--device",
            "cpu",
            "--report-dir",
            str(w["out"]),
        ],
        w["out"] / "shape_bias.json",
    ),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_full_disk_is_one_line_and_loses_nothing(writer, work, full_disk, capsys):
    argv, target = WRITERS[writer](work)
    target.write_text("the previous content\n")  # e.g. last week's baseline
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"modelval: error: cannot write {target}: No space left on device"), err
    assert target.read_text() == "the previous content\n"  # not truncated, not replaced
    assert sorted(p.name for p in work["out"].iterdir()) == [target.name]  # no temporary file, nothing else


def test_without_a_full_disk_the_same_writers_write(work, capsys):
    argv, target = WRITERS["shape-bias --report-dir"](work)
    assert main(argv) == 0
    # a decision file's decisions are that file: no decisions.csv beside it
    assert {p.name for p in work["out"].iterdir()} == {
        "shape_bias.json", "shape-bias-per-category.png", "shape-bias-per-category.pdf",
    }  # fmt: skip
    mode = stat.S_IMODE(target.stat().st_mode)
    assert mode == 0o666 & ~_umask()  # not mkstemp's 0600
    assert not [p for p in work["out"].iterdir() if p.name.startswith(".")]
    written = json.loads((work["out"] / "shape_bias.json").read_text())["written"]
    assert sorted(Path(p).name for p in written) == sorted(p.name for p in work["out"].iterdir())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


REPORT_DIR_COMMANDS = {
    "shape-bias": lambda w: ["shape-bias", "--decisions", str(w["resnet"])],
    "compare": lambda w: ["compare", str(w["resnet"]), str(w["resnet"])],
    "humans": lambda w: ["humans", "--decisions", str(w["resnet"])],
    "humans (several)": lambda w: ["humans", "--decisions", f"a={w['resnet']}", "--decisions", f"b={w['resnet']}"],
    "calibration": lambda w: ["calibration", "card", str(w["root"] / "logits.npz")],
    "reliability": lambda w: ["calibration", "reliability", str(w["root"] / "preds.jsonl")],
    "validate": lambda w: ["validate", "--models-file", str(w["root"] / "modelval.toml")],
}


@pytest.mark.parametrize("command", sorted(REPORT_DIR_COMMANDS))
def test_report_dir_naming_a_file_is_one_line(command, work, capsys):
    existing = work["root"] / "notes.txt"
    existing.write_text("keep me\n")
    assert main([*REPORT_DIR_COMMANDS[command](work), "--report-dir", str(existing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt is a file; --report-dir names a folder" in err
    assert existing.read_text() == "keep me\n"


def test_an_output_below_a_file_is_one_line(work, capsys):
    blocker = work["root"] / "blocker"
    blocker.write_text("")
    code = main(["shape-bias", "--decisions", str(work["resnet"]), "--out", str(blocker / "f.png")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is a file, not a folder" in err


def test_benchmark_report_dir_on_a_full_disk_leaves_no_empty_file(
    full_disk, model_vs_human_raw_data, modelval_reference_dir, monkeypatch, tmp_path, capsys
):
    """Before: ``benchmark --report-dir`` wrote with ``Path.write_text``: a full disk left a 0-byte benchmark.md."""
    from modelval.behaviour.experiments import experiment

    upstream = experiment("stylized").upstream
    session = model_vs_human_raw_data / upstream / f"{upstream}_subject-04_session_1.csv"
    folder = tmp_path / "report"
    code = main(["benchmark", "--decisions", str(session), "--report-dir", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"modelval: error: cannot write {folder / 'benchmark.md'}: No space left on device")
    assert [p.name for p in folder.iterdir()] == []  # no empty benchmark.md, no temporary file
