"""Downloading a W&B run's prediction artifacts into folders that modelval.metrics.artifacts evaluates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from modelval.contrib.wandb_artifacts import download_wandb_predictions
from modelval.errors import DownloadError
from modelval.extras import MissingExtraError
from modelval.metrics.artifacts import evaluate_paths


class FakeArtifact:
    def __init__(self, name: str, files: dict[str, str]):
        self.name = name
        self.files = files
        self.downloads: list[str] = []

    def download(self, root: str) -> str:
        self.downloads.append(root)
        Path(root).mkdir(parents=True)
        for name, text in self.files.items():
            (Path(root) / name).write_text(text)
        return root


class FakeRun:
    def __init__(self, artifacts):
        self.artifacts = artifacts

    def logged_artifacts(self):
        return iter(self.artifacts)


class FakeApi:
    def __init__(self, runs):
        self.runs = runs

    def run(self, path):
        return self.runs[path]


class TestWandb:
    def test_download_layout_filter_and_no_overwrite(self, tmp_path):
        line = json.dumps({"label": 1, "pred": 1, "conf": 0.9})
        preds = FakeArtifact("preds-flood-lb25-set1-seed42:v3", {"preds.jsonl": line})
        model = FakeArtifact("model-flood:v1", {"w.bin": "x"})
        existing = FakeArtifact("preds-flood-lb25-set2-seed42:v0", {"preds.jsonl": line})
        (tmp_path / "preds-flood-lb25-set2-seed42-v000").mkdir()
        api = FakeApi({"e/p/run1": FakeRun([preds, model, existing])})
        written = download_wandb_predictions("e/p/run1", tmp_path, api=api)
        assert written == [tmp_path / "preds-flood-lb25-set1-seed42-v003"]
        assert model.downloads == [] and existing.downloads == []
        # the downloaded tree is directly evaluable
        (record,) = [r for r in evaluate_paths([tmp_path]) if not r.skipped]
        assert (record.key.set, record.key.version) == (1, 3)
        # a second call downloads nothing
        assert download_wandb_predictions([FakeRun([preds])], tmp_path, api=api) == []

    def test_clear_error_without_wandb(self, tmp_path, monkeypatch):
        monkeypatch.setitem(sys.modules, "wandb", None)  # makes `import wandb` raise ImportError
        with pytest.raises(MissingExtraError, match=r"pip install 'modelval\[wandb\]'"):
            download_wandb_predictions("e/p/r", tmp_path)


def test_wandb_downloads_honour_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELVAL_OFFLINE", "1")
    with pytest.raises(DownloadError, match=r"this run is offline .*not downloading 'me/project/run1'"):
        download_wandb_predictions("me/project/run1", tmp_path / "preds")
    assert not (tmp_path / "preds").exists()
