"""Every command meets bad input with one line on stderr, exit status 2 and no traceback,
and every ``--json`` output parses with a strict parser (no NaN, no Infinity)."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from modelval.cli import main

RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
LONG = "x" * 300  # a file name longer than the 255 bytes of ext4, APFS, NTFS ...


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, modelval_reference_dir: Path) -> dict[str, Path]:
    """Decision files and folders a new user (or a hostile file) might hand the CLI."""
    folder = tmp_path_factory.mktemp("bad")
    published = (modelval_reference_dir / RESNET).read_text().splitlines()
    files = {
        "folder": folder / "a-folder",
        "latin1": folder / "latin1.csv",
        "short_row": folder / "short.csv",
        "duplicate": folder / "duplicate.csv",
        "bom": folder / "bom.csv",
        "all_na": folder / "all_na.csv",
        "partial": folder / "partial.csv",
        "huge_field": folder / "huge.csv",
    }
    files["folder"].mkdir()
    files["latin1"].write_bytes(("\n".join(published[:3]) + "\ncaf\xe9").encode("latin-1"))
    files["short_row"].write_text("\n".join([*published[:3], "resnet50,1,3,NaN,cat"]) + "\n")
    files["duplicate"].write_text("\n".join([*published, published[5]]) + "\n")
    files["bom"].write_text("\ufeff" + "\n".join(published) + "\n", encoding="utf-8")
    rows = [r.split(",") for r in published[1:]]
    files["all_na"].write_text("\n".join([published[0], *(",".join([*r[:4], "na", *r[5:]]) for r in rows)]) + "\n")
    files["partial"].write_text("\n".join(published[:101]) + "\n")
    huge = published[1].split(",")
    files["huge_field"].write_text("\n".join([published[0], ",".join([*huge[:-1], "x" * 200_000])]) + "\n")
    return files


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse errors
        return int(exit_.code or 0)


BAD_VALUES = [
    (["shape-bias", "--model", "efficientnet_lite0", "--batch-size", "0"], "batch size is 1 to"),
    (["shape-bias", "--model", "efficientnet_lite0", "--batch-size", "-1"], "batch size is 1 to"),
    (["shape-bias", "--model", "efficientnet_lite0", "--device", "tpu"], "unknown device 'tpu'"),
    (["shape-bias", "--model", "efficientnet_lite0", "--bootstrap", "-5"], "bootstrap resamples are 0"),
    (["shape-bias", "--model", "no_such_model"], "no_such_model"),
    (["baseline", "save", "--model", "efficientnet_lite0", "--batch-size", "0", "--out", "x.json"], "batch size"),
    (["models", "audit", "--batch-size", "0"], "batch size is 1 to"),
    (["accuracy", "--model", "efficientnet_lite0", "--device", "tpu"], "unknown device"),
    (["humans", "--model", "efficientnet_lite0", "--bootstrap", "-1"], "bootstrap resamples"),
    (["calibration", "ece", "x.jsonl", "--bins", "1000000000"], "number of bins is 1 to"),
    (["calibration", "reliability", "x.jsonl", "--out", "x.png", "--bins", "0"], "number of bins is 1 to"),
    (["data", "download", "--dataset", "stripes"], "invalid choice: 'stripes'"),
    (["no-such-command"], "invalid choice"),
    (["--debug"], "the following arguments are required: COMMAND"),
    # every command, each of its kinds of values (issue 23): refused before anything is read or loaded
    (["shape-bias", "--decisions", "x.csv", "--out", "figure.txt"], "the suffix picks the figure's format"),
    (["shape-bias", "--decisions", "x.csv", "--seed", "-1"], "a seed is a whole number from 0 to 4294967295"),
    (["shape-bias", "--decisions", "x.csv", "--decisions-out", "d.csv"], "needs --model without --decisions"),
    (["shape-bias", "--model", "efficientnet_lite0", "--resample", "pixels"], "invalid choice: 'pixels'"),
    (["shape-bias", "--model", "efficientnet_lite0", "--mean", "0.5,0.5"], "three"),
    (["shape-bias", "--model", "efficientnet_lite0", "--input-size", "8"], "the input size is 16 to 4096"),
    (["accuracy"], "one of the arguments --model --decisions is required"),
    (["accuracy", "--decisions", "x.csv", "--decisions-out", "d.csv"], "it needs --model, not --decisions"),
    (["accuracy", "--decisions", "x.csv", "--dataset", "stripes"], "invalid choice: 'stripes'"),
    (["compare", "a.csv"], "the following arguments are required: [LABEL=]B"),
    (["compare", "a.csv", "b.csv", "--permutations", "-1"], "permutations are 0 (no test) to"),
    (["compare", "a.csv", "b.csv", "--seed", "x"], "'x' is not a whole number"),
    (["humans"], "give a --model or a --decisions file"),
    (["humans", "--na", "skip", "--decisions", "x.csv"], "invalid choice: 'skip'"),
    (["humans", "--model", "a", "--model", "b"], "several observers are drawn into a folder: give --report-dir"),
    (["humans", "--decisions", "x.csv", "--report-dir", "figures"], "decision file not found: x.csv"),
    (["humans", "--report-dir", "figures"], "give a --model or a --decisions file"),
    (["baseline"], "the following arguments are required: ACTION"),
    (["baseline", "save", "--model", "efficientnet_lite0"], "the following arguments are required: --out"),
    (["baseline", "compare", "b.json", "--max-flips", "-1"], "flipped decisions allowed are 0 or more"),
    (["baseline", "compare", "b.json", "--max-shape-bias-delta", "nan"], "a shape-bias change is 0 to 1"),
    (["baseline", "compare", "b.json", "--max-probability-shift", "2"], "a probability change is 0 to 1"),
    (["validate", "--batch-size", "0"], "the batch size is 1 to"),
    (["validate", "--device", "gpu"], "unknown device 'gpu'"),
    (["data", "verify", "--dataset", "stripes"], "invalid choice: 'stripes'"),
    (["data", "list", "--json"], "unrecognized arguments: --json"),
    (["models", "list", "--bogus"], "unrecognized arguments: --bogus"),
    (["models", "fetch"], "name one or more models, or pass --all"),
    (["models", "audit", "--images", "-1"], "the stimuli compared are 1 to 1280"),
    (["calibration", "card", "x.npz", "--task", "regression"], "invalid choice: 'regression'"),
    (["calibration", "card", "x.npz", "--bins", "many"], "'many' is not a whole number"),
    (["calibration", "ece", "x.jsonl", "--convention", "sklearn"], "invalid choice: 'sklearn'"),
    (["calibration", "reliability", "x.jsonl"], "give --out FILE (the diagram) or --report-dir DIR"),
    (["calibration", "reliability", "x.jsonl", "--out", "r.jpg2"], "the suffix picks the figure's format"),
    (["calibration", "temperature", "--val", "v.npz"], "the following arguments are required: --test"),
    (["calibration", "temperature", "--val", "v", "--test", "t", "--sweep", "0"], "a temperature is more than 0"),
    (["calibration", "temperature", "--val", "v", "--test", "t", "--bins", "auto"], "'auto' is not a whole number"),
    (["metrics", "p.jsonl", "--num-classes", "0"], "the number of classes is 1 to 1000000"),
    (["metrics", "p.jsonl", "--few", "-2"], "a training-image count is 0 or more"),
    (["sensitivity"], "the following arguments are required: --model"),
    (["sensitivity", "--model", "efficientnet_lite0", "--resample", "pixels"], "invalid choice: 'pixels'"),
    # issue 31: a name longer than the file system takes (was an OSError traceback from argparse's type)
    (["shape-bias", "--decisions", "x.csv", "--report-dir", LONG], "is 300 bytes; file and folder names are at most"),
    (["shape-bias", "--decisions", "x.csv", "--out", LONG + ".png"], "is 304 bytes; file and folder names are at most"),
    (["shape-bias", "--model", "efficientnet_lite0", "--decisions-out", f"d/{LONG}/x.csv"], "is 300 bytes"),
    (["baseline", "save", "--model", "efficientnet_lite0", "--out", LONG + ".json"], "is 305 bytes"),
    (["calibration", "reliability", "x.jsonl", "--out", LONG + ".png"], "is 304 bytes"),
    (["validate", "--report-dir", LONG], "is 300 bytes"),
    # issue 31: run ids past SQLite's integer (was OverflowError, exit 3)
    (["runs", "show", str(2**64)], "is out of range; a run id is 1 to 9223372036854775807"),
    (["runs", "list", "--limit", "0"], "`runs list --limit` shows 1 to 1000000 runs"),
    # issue 31: --ray-address bogus (was ValueError, exit 3, after the stimuli loaded)

    # issue 31: more bad inputs tried as a new user would
    (["models", "list", "--family", "vit"], "--family 'vit' is not one of the registry's: deit, efficientnet, resnet"),
    (["models", "list", "--source", "hub"], "--source 'hub' is not one of the registry's"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_VALUES, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_values_are_one_line(capsys, argv, message):
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("modelval: error:")
    assert message in err


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("folder", "is a folder"),
        ("latin1", "is not UTF-8 text"),
        ("short_row", "fields where the header has 8"),
        ("duplicate", "two rows for the image"),
    ],
)
def test_bad_decision_files_are_one_line(capsys, bad_files, name, message):
    code = run(["shape-bias", "--decisions", str(bad_files[name])])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert message in err


#: Every command that reads a decision CSV, with the file in its place (issue 23: one reader for all).
CSV_READERS = {
    "shape-bias": lambda f, tmp: ["shape-bias", "--decisions", str(f)],
    "accuracy": lambda f, tmp: ["accuracy", "--decisions", str(f)],
    "compare A": lambda f, tmp: ["compare", str(f), str(tmp / "b.csv")],
    "compare B": lambda f, tmp: ["compare", str(tmp / "a.csv"), str(f)],
    "humans": lambda f, tmp: ["humans", "--decisions", str(f)],
    "humans (figures)": lambda f, tmp: ["humans", "--decisions", str(f), "--decisions", str(f), "--report-dir",
                                        str(tmp / "figs")],
}


@pytest.mark.parametrize("command", sorted(CSV_READERS))
@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("folder", "is a folder; pass the decision file (a CSV file) itself"),
        ("latin1", "is not UTF-8 text (line 4, byte"),  # the line of the bad byte, not a chunk offset
        ("huge_field", "line 2: not a readable CSV file (field larger than field limit (131072))"),
    ],
)
def test_every_csv_reader_meets_a_bad_file_with_one_line(
    capsys, bad_files, tmp_path, modelval_reference_dir, command, name, message
):
    for other in ("a.csv", "b.csv"):
        (tmp_path / other).write_text((modelval_reference_dir / RESNET).read_text())
    code = run(CSV_READERS[command](bad_files[name], tmp_path))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("modelval: error: ") and message in err


def test_a_bad_file_in_the_reference_folder_is_one_line(capsys, modelval_reference_dir, tmp_path):
    reference = tmp_path / "raw-data"
    reference.mkdir()
    for path in modelval_reference_dir.glob("style-transfer-512-nomask-experiment_subject-*.csv"):
        (reference / path.name).symlink_to(path)
    victim = sorted(reference.iterdir())[3]
    victim.unlink()
    victim.write_bytes((modelval_reference_dir / victim.name).read_bytes().replace(b"airplane", b"avi\xf3n", 1))
    argv = ["humans", "--decisions", str(modelval_reference_dir / RESNET), "--reference-dir", str(reference)]
    assert run(argv) == 2  # the reference check sees the changed file first
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not hold the published human observers" in err
    assert run([*argv, "--allow-modified-reference"]) == 2  # allowed: then the reader refuses it in one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{victim} is not UTF-8 text" in err


def test_duplicate_rows_name_the_image_and_both_lines(capsys, bad_files):
    run(["shape-bias", "--decisions", str(bad_files["duplicate"])])
    err = capsys.readouterr().err
    assert "lines 6 and 1282" in err  # the published file's line 6 again after its 1281 lines


def test_bom_before_the_header_is_read(capsys, bad_files):
    assert run(["shape-bias", "--decisions", str(bad_files["bom"]), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shape_hits"] == 162


def test_partial_file_warns_with_its_coverage(capsys, bad_files):
    assert run(["shape-bias", "--decisions", str(bad_files["partial"]), "--json"]) == 0
    captured = capsys.readouterr()
    assert "covers 100 of the 1280 cue-conflict images" in captured.err
    assert json.loads(captured.out)["images"] == 100


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_every_json_output_is_strict(capsys, bad_files, modelval_reference_dir, tmp_path):
    """Inputs that produce undefined numbers: all-`na` decisions, empty shot groups, a single class."""
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text("".join(json.dumps({"label": 0, "pred": 0, "conf": 0.9}) + "\n" for _ in range(5)))
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps([500, 500]))
    import numpy as np

    one_hot = tmp_path / "one_hot.npz"  # every prediction right at confidence 1: zero-width intervals, one bin
    np.savez(one_hot, probs=np.eye(3)[[0, 1, 2, 0, 1, 2]], labels=np.array([0, 1, 2, 0, 1, 2]))
    logits = tmp_path / "logits.npz"
    np.savez(logits, logits=np.eye(3)[[0, 1, 2, 0, 1, 2]] * 5.0, labels=np.array([0, 1, 2, 0, 1, 2]))
    commands = [
        ["calibration", "card", str(one_hot), "--bins", "auto"],
        ["calibration", "reliability", str(predictions), "--out", str(tmp_path / "rel.png")],
        ["calibration", "temperature", "--val", str(logits), "--test", str(logits), "--method", "isotonic"],
        ["shape-bias", "--decisions", str(bad_files["all_na"]), "--model", "resnet50_in", "--no-sanity-gate"],
        ["accuracy", "--decisions", str(bad_files["all_na"])],
        ["humans", "--decisions", str(bad_files["all_na"]), "--reference-dir", str(modelval_reference_dir)],
        ["compare", str(bad_files["all_na"]), str(modelval_reference_dir / RESNET)],
        ["metrics", str(predictions), "--train-counts", str(counts), "--num-classes", "2"],
        ["calibration", "ece", str(predictions)],
        ["models", "list"],
        ["models", "audit", "--model", "efficientnet_lite0", "--images", "2"],
    ]
    for argv in commands:
        assert run([*argv, "--json"]) == 0, capsys.readouterr().err
        payload = _strict(capsys.readouterr().out)
        assert payload is not None
    all_na = ["shape-bias", "--decisions", str(bad_files["all_na"]), "--model", "resnet50_in", "--json"]
    assert run(all_na) == 1  # no hits at all: not a working classifier (the sanity gate)
    shape = _strict(capsys.readouterr().out)
    assert isinstance(shape, dict)
    assert shape["shape_bias"] is None and "0/0" in shape["null_reasons"]["difference"]


def test_symlink_loop_in_the_stimuli_is_one_line(capsys, modelval_data_root, tmp_path):
    root = tmp_path / "cue-conflict"
    for category in sorted(p.name for p in modelval_data_root.iterdir() if p.is_dir()):
        (root / category).mkdir(parents=True)
        for name in sorted(os.listdir(modelval_data_root / category)):
            (root / category / name).symlink_to(modelval_data_root / category / name)
    loop = sorted((root / "bear").iterdir())[0]
    loop.unlink()
    loop.symlink_to(loop)
    code = run(["shape-bias", "--model", "efficientnet_lite0", "--data-root", str(root), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and loop.name in err and "Traceback" not in err


def test_folder_in_place_of_a_png_in_verify_data(capsys, modelval_data_root, tmp_path):
    root = tmp_path / "cue-conflict"
    shutil.copytree(modelval_data_root / "bear", root / "bear")
    victim = sorted((root / "bear").iterdir())[0]
    victim.unlink()
    victim.mkdir()
    code = run(["data", "verify", "--data-root", str(root)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "a folder stands where an image file should be" in err


#: Settings without a flag, from their variable or the config file's [settings]: checked as a flag would be.
BAD_SETTINGS = [
    ({"MODELVAL_THREADS": "0"}, "", "$MODELVAL_THREADS: 0 is out of range; threads are 'auto' or 1 to"),
    ({"MODELVAL_THREADS": "two"}, "", "$MODELVAL_THREADS: 'two' is not a whole number"),
    ({}, "workers = -3", "[settings] workers: -3 is out of range; decoding workers are 0"),
    ({}, "threads = 0", "[settings] threads: 0 is out of range; threads are 'auto' or 1 to"),
    ({}, "normalization = 'half'", "[settings]: 'normalization' is not a setting"),
    ({}, "device = 'tpu'", "[settings] device: unknown device 'tpu'"),
    ({"MODELVAL_NO_CACHE": "maybe"}, "", "$MODELVAL_NO_CACHE: 'maybe' is not true or false"),
    ({}, "download_timeout = -1", "[settings] download_timeout: -1 is out of range; the timeout is more than 0"),
    ({}, "download_retries = 0", "[settings] download_retries: 0 is out of range; downloads are tried 1 to 20"),
]


@pytest.mark.parametrize(("env", "config", "message"), BAD_SETTINGS)
@pytest.mark.parametrize("command", ["shape-bias", "sensitivity"])
def test_bad_settings_from_a_variable_or_the_config_file_are_one_line(
    env, config, message, command, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "modelval.toml").write_text(f"[settings]\n{config}\n")
    assert run([command, "--model", "efficientnet_lite0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message in err


def test_a_mirror_that_is_no_url_is_one_line(tmp_path, monkeypatch, capsys):
    """Was ``--url notaurl``: tried 4 times, then requests' "Perhaps you meant https://notaurl?"."""
    monkeypatch.setenv("MODELVAL_MIRROR", "notaurl")
    assert run(["data", "download", "--data-root", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'notaurl/cue-conflict.tar.gz' is not an http:// or https://" in err


def test_truncated_png_with_workers_is_one_line(capfd, modelval_data_root, tmp_path, monkeypatch):
    root = tmp_path / "cue-conflict"
    shutil.copytree(modelval_data_root, root)
    victim = sorted((root / "bear").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:3000])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "modelval.toml").write_text("[settings]\nworkers = 2\n")
    code = run([
        "shape-bias", "--model", "efficientnet_lite0", "--data-root", str(root), "--no-cache",
        "--allow-modified-stimuli",
    ])  # fmt: skip
    err = capfd.readouterr().err
    assert code == 2 and "Traceback" not in err and "Original Traceback" not in err
    assert err.strip().splitlines() == [err.strip()] and victim.name in err and "truncated" in err


def test_prediction_rows_with_huge_labels_are_dropped(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    rows = [{"label": 10**30, "pred": 0, "conf": 0.5}, {"label": 0, "pred": 0, "conf": 0.9}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for argv in (["calibration", "ece", str(path), "--json"], ["metrics", str(path), "--json"]):
        assert run(argv) == 0
        out = capsys.readouterr().out
        assert "Traceback" not in out
    assert run(["calibration", "ece", str(path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[0]
    assert record["rows_dropped"] == 1 and "label above 1000000 (not a class index)" in record["drop_reasons"]


def test_a_single_huge_label_does_not_allocate(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"label": 100000, "pred": 0, "conf": 0.5}) + "\n")
    code = run(["metrics", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--num-classes 100001" in err


def test_pickled_object_in_a_logits_file_never_suggests_running_it(tmp_path, capsys):
    import datetime
    import pickle

    bad = tmp_path / "val.pt"
    bad.write_bytes(pickle.dumps({"logits": datetime.datetime(2020, 1, 1)}))
    code = run(["calibration", "temperature", "--val", str(bad), "--test", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "not a plain tensor file" in err and "weights_only=False" not in err and "weights_only" not in err


def test_two_copies_of_one_artifact_are_reported_not_lost(tmp_path, capsys):
    rows = "".join(json.dumps({"label": i % 2, "pred": 0, "conf": 0.7}) + "\n" for i in range(10))
    for folder in ("preds-ev-lb10-set1-seed1-v003", "preds-ev-lb10-set1-seed1:v003"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "p.jsonl").write_text(rows)
    assert run(["calibration", "ece", str(tmp_path), "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    evaluated = [r for r in records if not r["skipped"]]
    duplicates = [r for r in records if r["skipped"]]
    assert len(evaluated) == 1 and evaluated[0]["path"].endswith("seed1-v003/p.jsonl")  # the path that sorts first
    assert len(duplicates) == 1 and duplicates[0]["reason"].startswith("duplicate of")


@pytest.mark.parametrize(("option", "out", "written"),
                         [("--report-dir", "figs", "figs/p-reliability.png"), ("--out", "rel", "rel.png")])
def test_reliability_reports_the_file_it_wrote(tmp_path, capsys, option, out, written):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"label": i % 2, "pred": 0, "conf": 0.6}) + "\n" for i in range(20)))
    (tmp_path / "figs").mkdir()
    assert run(["calibration", "reliability", str(path), option, str(tmp_path / out)]) == 0
    assert f"wrote {tmp_path / written}:" in capsys.readouterr().out
    assert (tmp_path / written).is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["data", "download", "--data-root", "{file}"], "is a file; the cue-conflict stimuli go into a folder"),
        (["data", "download", "--humans", "--data-root", "{file}"], "is a file; the human raw data go into a folder"),
        (["data", "verify", "--data-root", "{file}"], "is a file, not the cue-conflict folder"),
    ],
)
def test_a_file_where_the_data_folder_goes_is_named_as_such(capsys, tmp_path, argv, message):
    """Before: "cue-conflict folder not found: notes.txt" (it exists), and "notes.txt is incomplete: ... is
    missing; re-run with --force" for the human data (--force would then fail on the file)."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    assert run([arg.format(file=notes) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{notes} {message}" in err and notes.read_text() == "my notes"


def test_the_library_refuses_what_the_command_line_refuses(modelval_reference_dir):
    """Before: ``shape_bias(..., bootstrap=-5)`` ran (no interval) where ``--bootstrap -5`` is refused."""
    import modelval
    from modelval.behaviour.decisions import read_decisions
    from modelval.behaviour.shape_bias import compute_shape_bias
    from modelval.errors import InputValidationError

    for settings, message in [
        ({"bootstrap": -5}, "bootstrap=-5 is out of range; bootstrap resamples are 0 (off) to 100000"),
        ({"batch_size": 0}, "batch_size=0 is out of range; the batch size is 1 to 65536"),
        ({"workers": -3}, "workers=-3 is out of range; decoding workers are 0 (decode in this process) to 256"),
        ({"threads": 0}, "threads=0 is out of range; threads are 'auto' or 1 to 1024"),
        ({"permutations": -1}, "permutations=-1 is out of range; permutations are 0 (no test) to 1000000"),
        ({"device": "tpu"}, "unknown device 'tpu'; use auto, cpu, cuda, cuda:N or mps"),
    ]:
        with pytest.raises(InputValidationError, match=re.escape(message)):
            modelval.shape_bias("efficientnet_lite0", **settings)
    path = modelval_reference_dir / RESNET  # was os.environ["MODELVAL_REFERENCE_DIR"]: set by CI only
    with pytest.raises(InputValidationError, match="bootstrap=-5 is out of range"):
        compute_shape_bias(read_decisions(path), n_bootstrap=-5)
    with pytest.raises(InputValidationError, match="bootstrap=-5 is out of range"):
        modelval.shape_bias_of_decisions(path, bootstrap=-5)


def test_a_factory_that_raises_is_bad_input_as_the_docs_say(capsys, stimulus_subset, tmp_path):
    """Issue 32: docs/cli.md and docs/bad-inputs.md said exit 3 ("unexpected error"), the code and docs/zoo.md 2.
    The contract: the user's own code failing is bad input (2), named with its exception; 3 is a defect of ours."""
    nets = tmp_path / "nets.py"
    nets.write_text('def build():\n    raise RuntimeError("the factory fell over")\n')
    argv = [
        "shape-bias",
        "--model",
        f"{nets}:build",
        "--data-root",
        str(stimulus_subset(1)),
        "--allow-modified-stimuli",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"modelval: error: the model factory {nets}:build() raised RuntimeError: the factory fell over\n"
    root = Path(__file__).resolve().parents[2]
    bad_inputs = (root / "docs" / "bad-inputs.md").read_text()
    (row,) = [line for line in bad_inputs.splitlines() if line.startswith("| a factory that raises")]
    assert row.split("|")[2].strip() == "2" and "modelval: error: the model factory" in row
    cli = (root / "docs" / "cli.md").read_text()
    (three,) = [line for line in cli.splitlines() if line.startswith("| 3 |")]
    (two,) = [line for line in cli.splitlines() if line.startswith("| 2 |")]
    assert "own code" not in three and "a model's own code that fails" in two
