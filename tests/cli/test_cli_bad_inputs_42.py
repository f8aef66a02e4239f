"""Issue 42: zero-shot settings on models they do not fit, offline downloads, degenerate zero-shot heads, and
bad input that was exit 3. Each refusal is exit 2 and one line on stderr, found before any work starts."""

from __future__ import annotations

import http.server
import pickle
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelval.cli import main

ONE_LINE_CODE = 2


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    """Run the CLI in-process: its exit status and its stderr."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def assert_one_line(code: int, err: str, *needles: str) -> None:
    assert code == ONE_LINE_CODE, err
    assert err.count("\n") == 1 and "Traceback" not in err and "unexpected error" not in err, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty caches, HF cache and run store under tmp_path; online unless a test says otherwise."""
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("MODELVAL_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.setenv("MODELVAL_RUNS_DB", str(tmp_path / "runs.sqlite"))
    for name in ("MODELVAL_OFFLINE", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "MODELVAL_MIRROR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


# --- point 4: zero-shot settings on a model that is not zero-shot ----------------------------------------------


@pytest.mark.parametrize("option", [["--class-space", "16"], ["--templates", "simple7"], ["--logit-scale", "50"]])
def test_zero_shot_settings_on_an_ordinary_classifier_are_refused(option, capsys, private):
    """Was: --class-space 16 read outputs 0-15 (tench ... robin) as the 16 categories (0.0625, exit 0); the
    templates and the logit scale were ignored without a word."""
    code, err = run(capsys, ["accuracy", "--model", "efficientnet_lite0", *option])
    assert_one_line(code, err, "'efficientnet_lite0' is not a zero-shot (image-text) model", "--class-space")


def test_zero_shot_settings_on_any_spec_that_is_never_zero_shot():
    from modelval.errors import ModelvalError
    from modelval.models.loader import entry_for_spec
    from modelval.models.specs import check_zero_shot_spec
    from modelval.models.zero_shot import ZeroShotSettings

    for spec in ("timm:resnet18", "torchvision:resnet18", "nets.py:build", "torchscript:m.pt"):
        with pytest.raises(ModelvalError, match="is not a zero-shot"):
            check_zero_shot_spec(spec)
    with pytest.raises(ModelvalError, match="the timm model 'timm:resnet18' is not a zero-shot"):
        entry_for_spec("timm:resnet18", zero_shot=ZeroShotSettings(class_space="16"))
    check_zero_shot_spec("open_clip:RN50/none")  # these may be
    check_zero_shot_spec("hf:openai/clip-vit-base-patch32")


# --- point 5: offline is no request at all ---------------------------------------------------------------------


class LoggingServer:
    """A server on 127.0.0.1 that records every request (any method) and answers 404."""

    def __init__(self) -> None:
        self.log: list[str] = []
        log = self.log

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                log.append(f"{self.command} {self.path}")
                self.send_error(404)

            do_GET = do_HEAD = do_POST = do_PUT = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def server(private: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LoggingServer]:
    """Every download address (the mirror, the HF endpoint) points at a server that logs each request."""
    served = LoggingServer()
    monkeypatch.setenv("MODELVAL_MIRROR", served.url)
    monkeypatch.setenv("HF_ENDPOINT", served.url)
    try:
        from huggingface_hub import constants

        monkeypatch.setattr(constants, "ENDPOINT", served.url)  # read once, when huggingface_hub was imported
    except ImportError:
        pass
    yield served
    served.httpd.shutdown()
    served.httpd.server_close()


def test_open_clip_fetch_offline_asks_nothing_and_says_the_weights_are_missing(server, capsys, monkeypatch):
    """Was: ``ok open_clip:RN50/openai: bundled with its package``, exit 0, with nothing cached."""
    pytest.importorskip("open_clip")
    code, err = run(capsys, ["models", "fetch", "open_clip:RN50/openai", "--offline"])
    assert_one_line(code, err, "weights for model 'open_clip:RN50/openai' are not available", "timm/resnet50_clip")
    assert server.log == []


def test_open_clip_evaluation_offline_asks_nothing(server, capsys, monkeypatch):
    """Was: open_clip asked the Hub for the weights under MODELVAL_OFFLINE=1."""
    pytest.importorskip("open_clip")
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    code, err = run(capsys, ["shape-bias", "--model", "open_clip:RN50/openai", "--no-cache", "--bootstrap", "0"])
    assert_one_line(code, err, "offline mode: nothing is downloaded", "modelval models fetch open_clip:RN50/openai")
    assert server.log == []


@pytest.mark.parametrize(
    "argv",
    [
        ["data", "download", "--dataset", "colour", "--offline"],
        ["data", "download", "--dataset", "colour", "--humans", "--offline"],
        ["data", "download", "--humans", "--offline"],
    ],
)
def test_data_download_offline_asks_nothing(argv, server, capsys, monkeypatch, private):
    monkeypatch.setenv("MODELVAL_DATA_HOME", str(private / "home"))  # nothing there yet
    code, err = run(capsys, argv)
    assert_one_line(code, err, "this run is offline")
    assert server.log == []


def test_the_library_downloads_honour_offline_without_the_variable(server, tmp_path):
    """Was: ``download_stimuli(dataset="colour", offline=True)`` fetched the archive (its release path never got the
    argument), and model-vs-human's human data took no ``offline`` at all."""
    from modelval.datasets.fetch import download_stimuli
    from modelval.datasets.human_data import download_model_vs_human_raw_data
    from modelval.errors import DownloadError

    with pytest.raises(DownloadError, match="this run is offline"):
        download_stimuli(tmp_path / "colour", dataset="colour", offline=True, progress=False)
    with pytest.raises(DownloadError, match="this run is offline"):
        download_model_vs_human_raw_data("colour", tmp_path / "humans", offline=True, progress=False)
    assert server.log == []


# --- point 7: degenerate zero-shot heads -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        (["--logit-scale", "0"], "logit scale '0' is 0; a logit scale is a number from 0.01"),
        (["--logit-scale", "1e-30"], "logit scale '1e-30' is 1e-30"),
        (["--logit-scale", "inf"], "logit scale 'inf' is inf"),
        (["--logit-scale", "nan"], "logit scale 'nan' is nan"),
        (["--templates", "{{}}"], "a template holds exactly one {} for the class name"),
    ],
)
def test_a_degenerate_zero_shot_setting_is_refused_with_its_cause(option, needle, capsys, private):
    """Was: every decision "airplane", and the sanity gate blamed the weights."""
    pytest.importorskip("open_clip")
    code, err = run(capsys, ["shape-bias", "--model", "open_clip:RN50/none", "--bootstrap", "0", *option])
    assert_one_line(code, err, needle)


class SameTokens:
    """What transformers builds for a CLIP folder saved without its tokenizer: every text the same tokens."""

    def __call__(self, texts, padding=False, truncation=False, return_tensors=None):
        import torch

        return {"input_ids": torch.tensor([[0, 2, 2, 1]] * len(texts)), "attention_mask": torch.ones(len(texts), 4)}


def test_a_tokenizer_that_cannot_tell_texts_apart_is_named():
    transformers = pytest.importorskip("transformers")
    import torch

    from modelval.errors import DataError
    from modelval.models.zero_shot import ZeroShotSettings, hf_classifier

    torch.manual_seed(0)
    config = transformers.CLIPConfig(text_config=TEXT, vision_config=VISION, projection_dim=16)
    model = transformers.CLIPModel(config).eval()
    with pytest.raises(DataError, match=r"the zero-shot head is degenerate: 16 of 16 classes .* the tokenizer"):
        hf_classifier(model, SameTokens(), ZeroShotSettings("16", "a photo of a {}."), "test")


TEXT = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            max_position_embeddings=77)  # fmt: skip
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=32,
              patch_size=16)  # fmt: skip


def test_an_hf_clip_folder_without_its_tokenizer_is_refused(capsys, private):
    """transformers builds a tokenizer with an empty vocabulary for it: every class text is the same tokens."""
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    config = transformers.CLIPConfig(text_config=TEXT, vision_config=VISION, projection_dim=16)
    transformers.CLIPModel(config).save_pretrained(private / "clip")  # no tokenizer files
    capsys.readouterr()
    code, err = run(capsys, ["shape-bias", "--model", f"hf:{private / 'clip'}", "--class-space", "16",
                             "--bootstrap", "0", "--no-cache", "--device", "cpu"])  # fmt: skip
    # transformers' own progress bar ("Loading weights") may precede the one line of modelval
    lines = [line for line in err.splitlines() if line.strip() and "it/s]" not in line]
    assert_one_line(code, "\n".join(lines) + "\n", "the zero-shot head is degenerate", "tokenizer")


# --- point 8: exit 3 for bad input ----------------------------------------------------------------------------


def _status_file(folder: Path) -> list[str]:
    (folder / "status.toml").write_text("models = 3\n")
    return ["--status", str(folder / "status.toml")]


def _models_file(folder: Path) -> list[str]:
    pytest.importorskip("submitit", reason="pip install 'modelval[slurm]'")
    (folder / "modelval.toml").write_text('[models.lite]\nspec = "efficientnet_lite0"\n')
    return ["validate", "--models-file", str(folder / "modelval.toml"), "--executor", "submitit", "--slurm"]


def _templates_file(folder: Path) -> str:
    (folder / "templates.txt").write_text("a photo of a {}.\n" * 300_000)
    return str(folder / "templates.txt")


def _pickle_in_the_hf_cache(folder: Path) -> list[str]:
    snapshot = folder / "hf" / "hub" / "models--timm--resnet18.a1_in1k" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("a" * 40)
    (snapshot / "pytorch_model.bin").write_bytes(pickle.dumps(3))  # a pickle, but not torch.save's
    return ["shape-bias", "--model", "timm:resnet18.a1_in1k", "--no-cache"]


def _runs_with_decisions(folder: Path, decisions: str) -> list[str]:
    from modelval.records.run_store import _SCHEMA

    with sqlite3.connect(folder / "runs.sqlite") as connection:
        connection.executescript(_SCHEMA)
        for stored in (decisions, '{"a.png": ["cat", "dog"]}'):
            connection.execute(
                "INSERT INTO runs (created, command, model, dataset, label, summary, decisions, provenance) "
                "VALUES ('2026-01-01T00:00:00', 'shape-bias', 'm', 'cue-conflict', 'm', '{}', ?, '{}')",
                (stored,),
            )
    return ["runs", "diff", "1", "2"]


OPEN_CLIP = ["shape-bias", "--model", "open_clip:RN50/none", "--bootstrap", "0", "--templates"]
#: (id, argv built in the test's folder, what the one line says). Each was exit 3 (or ran for minutes).
CASES = [
    ("named-field", lambda f: [*OPEN_CLIP, "a {x} {}"], "exactly one {} for the class name"),
    ("two-fields", lambda f: [*OPEN_CLIP, "a {} and a {}"], "exactly one {} for the class name"),
    ("format-width", lambda f: [*OPEN_CLIP, "a {{}} {:999999999999}"], "exactly one {} for the class name"),
    ("300k-templates", lambda f: [*OPEN_CLIP, _templates_file(f)], "a template set is at most 1000 templates"),
    ("status-models-3", lambda f: ["runs", "verdict", *_status_file(f)], "'models' is 3; a status file has"),
    ("window-1e10", lambda f: ["runs", "verdict", *_status_file(f), "--window", "1e10"], "at most 87840"),
    ("slurm-type", lambda f: [*_models_file(f), "cluster=local,timeout_min=abc"], "timeout_min is a whole number"),
    ("slurm-negative", lambda f: [*_models_file(f), "cluster=local,gpus_per_node=-1"], "gpus_per_node is a whole"),
    ("slurm-unknown", lambda f: [*_models_file(f), "cluster=local,bogus=1"], "Unknown argument 'bogus'"),
    ("device-mps", lambda f: ["shape-bias", "--model", "efficientnet_lite0", "--device", "mps"], "MPS"),
    ("pickle-hf-cache", _pickle_in_the_hf_cache, "a Python pickle but not a PyTorch weights file"),
    ("diff-not-pairs", lambda f: _runs_with_decisions(f, '{"a.png": 3}'), "not image -> [category, response]"),
    ("diff-short-pair", lambda f: _runs_with_decisions(f, '{"a.png": ["cat"]}'), "not image -> [category, response]"),
]


@pytest.mark.parametrize(("argv", "needle"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys, private, monkeypatch, request):
    """Each is refused before the work it would spoil starts (a template before the model loads, a SLURM parameter
    before the stimuli do), so each returns at once."""
    if request.node.callspec.id == "device-mps" and sys.platform == "darwin":
        pytest.skip("this machine may have MPS")
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")  # none of them may download
    code, err = run(capsys, argv(private))
    assert_one_line(code, err, needle)
