"""Model metadata beside the benchmark's results (issue 30, point 5): parameters, training images, training data
and kind, from the registry (the bundled EfficientNet-Lite entries), a ``--metadata`` file (JSON or CSV), an
evaluated model's own module, or a timm tag; in the Markdown, the JSON and the CSV, and drawn against scale."""

from __future__ import annotations

import csv
import io
import json

import pytest

from modelval.api.benchmark import _observer_metadata, read_metadata
from modelval.behaviour.benchmark import ModelMetadata
from modelval.cli import main
from modelval.errors import DataError
from modelval.models.efficientnet import LITE_PARAMETERS
from modelval.models.registry import get_entry
from modelval.models.sources import _timm_training
from modelval.paths import package_data_dir
from modelval.preprocessing import PreprocessConfig

BASELINES = package_data_dir() / "baselines"
RESNET = "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
VGG16 = "style-transfer-512-nomask-experiment_vgg16_session-1.csv"
QUIET = ["--bootstrap", "0", "--permutations", "0"]
STATED = {
    "ResNet-50": {"parameters": 25557032, "training_images": 1.281167e6, "training_data": "ImageNet-1k",
                  "training_kind": "supervised", "source": "torchvision ResNet50_Weights.IMAGENET1K_V1"},
    "VGG-16": {"parameters": "138357544", "training_images": "1281167", "training_data": "ImageNet-1k"},
}  # fmt: skip


def _argv(reference, *extra):
    return [
        "benchmark", "--decisions", str(BASELINES / "efficientnet_lite0.csv"),
        "--decisions", f"ResNet-50={reference / RESNET}", "--decisions", f"VGG-16={reference / VGG16}", *QUIET, *extra,
    ]  # fmt: skip


def _write_csv(path, rows):
    fields = ["label", "parameters", "training_images", "training_data", "training_kind", "source"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        for label, values in rows.items():
            writer.writerow({"label": label, **values})
    return path


def test_the_lite_entries_state_their_metadata_and_the_counts_are_the_modules():
    """The registry's parameter counts are the real package's module's (efficientnet-lite-pytorch)."""
    efficientnet = pytest.importorskip("efficientnet_lite_pytorch")
    for variant, count in LITE_PARAMETERS.items():
        module = efficientnet.EfficientNet.from_name(f"efficientnet-{variant}")
        assert sum(p.numel() for p in module.parameters()) == count
        entry = get_entry(f"efficientnet_{variant}")
        assert entry.parameters == count
        assert entry.training is not None and (entry.training.data, entry.training.images) == ("ImageNet-1k", 1281167)


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_metadata_from_a_file_and_the_registry_in_every_output(modelval_reference_dir, tmp_path, capsys, suffix):
    path = tmp_path / f"meta{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(STATED))
    else:
        _write_csv(path, STATED)
    assert main([*_argv(modelval_reference_dir, "--metadata", str(path)), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    found = {entry["observer"]: entry["metadata"] for entry in payload["observers"]}
    assert found["ResNet-50"] == {
        "parameters": 25557032, "training_images": 1281167, "training_data": "ImageNet-1k",
        "training_kind": "supervised", "source": "torchvision ResNet50_Weights.IMAGENET1K_V1",
    }  # fmt: skip
    assert found["VGG-16"]["parameters"] == 138357544 and found["VGG-16"]["training_kind"] is None
    assert found["VGG-16"]["source"] == f"metadata file {path.name}"
    assert found["efficientnet_lite0"] == {
        "parameters": 4652008, "training_images": 1281167, "training_data": "ImageNet-1k",
        "training_kind": "supervised", "source": "registry entry efficientnet_lite0",
    }  # fmt: skip
    assert "metadata" in payload["definitions"]

    assert main([*_argv(modelval_reference_dir, "--metadata", str(path))]) == 0
    markdown = capsys.readouterr().out
    lite = "| efficientnet_lite0 | 4.65 M | 1.28 M | ImageNet-1k | supervised | registry entry efficientnet_lite0 |"
    assert lite in markdown
    assert "| VGG-16 | 138 M | 1.28 M | ImageNet-1k | n/a |" in markdown

    assert main([*_argv(modelval_reference_dir, "--metadata", str(path)), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    resnet = next(r for r in rows if r["observer"] == "ResNet-50" and r["dataset"] == "all")
    assert resnet["parameters"] == "25557032" and resnet["training_images"] == "1281167"
    assert next(r for r in rows if r["observer"] == "humans")["parameters"] == ""


def test_without_metadata_the_reproduction_outputs_are_unchanged(modelval_reference_dir, capsys):
    """Files that no registry entry and no --metadata describe: no metadata columns, no metadata section."""
    argv = ["benchmark", "--decisions", f"ResNet-50={modelval_reference_dir / RESNET}", *QUIET]
    assert main([*argv, "--csv"]) == 0
    assert "parameters" not in capsys.readouterr().out.splitlines()[0]
    assert main(argv) == 0
    assert "model metadata" not in capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["observers"][0]["metadata"] is None


@pytest.mark.parametrize(
    ("content", "suffix", "message"),
    [
        ('{"ResNet50": {"parameters": 1}}', ".json", "metadata for ResNet50, which no observer"),
        ('{"ResNet-50": {"parameters": 2.5}}', ".json", "parameters is a positive whole number"),
        ('{"ResNet-50": {"parameters": -3}}', ".json", "parameters is a positive whole number"),
        ('{"ResNet-50": {"params": 3}}', ".json", "unknown field(s) params"),
        ('{"ResNet-50": {"training_data": 3}}', ".json", "training_data is text"),
        ("[1, 2]", ".json", "give one object"),
        ("{", ".json", "not valid JSON"),
        ("name,parameters\nResNet-50,3\n", ".csv", "a 'label' column"),
        ("label,parameters\nResNet-50,3\nResNet-50,4\n", ".csv", "each once"),
        ("ResNet-50: 3", ".yaml", "is .json or .csv"),
    ],
)
def test_a_bad_metadata_file_is_one_line_and_exit_2(content, suffix, message, modelval_reference_dir, tmp_path,
                                                     capsys):  # fmt: skip
    path = tmp_path / f"meta{suffix}"
    path.write_text(content)
    assert main(["benchmark", "--decisions", f"ResNet-50={modelval_reference_dir / RESNET}", *QUIET,
                 "--metadata", str(path)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err


def test_the_report_folder_draws_the_measures_against_scale(modelval_reference_dir, tmp_path, capsys):
    path = tmp_path / "meta.json"
    path.write_text(json.dumps(STATED))
    report = tmp_path / "report"
    assert main([*_argv(modelval_reference_dir, "--metadata", str(path)), "--report-dir", str(report)]) == 0
    capsys.readouterr()
    assert (report / "benchmark-scale.png").stat().st_size > 10_000 and (report / "benchmark-scale.pdf").is_file()
    written = json.loads((report / "benchmark.json").read_text())["files"]
    assert str(report / "benchmark-scale.png") in written


def test_an_evaluated_models_parameters_are_counted_from_its_module(stimulus_subset):
    """The model's run as benchmark makes it (run_model); its module's parameters counted, a stated file first."""
    torch = pytest.importorskip("torch")
    from modelval.api.options import EvaluationOptions, ModelOptions
    from modelval.api.pipeline import run_model

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000))
    options = EvaluationOptions(data_root=stimulus_subset(1), allow_modified_stimuli=True, cache=False)
    run = run_model(net, preprocess=PreprocessConfig(), options=options, model_options=ModelOptions(device="cpu"))
    found = _observer_metadata({"net": {}}, {"net": {"cue-conflict": run}}, None)["net"]
    assert found.parameters == 48 * 1000 + 1000 and found.source == "parameters counted from the module"
    assert found.training_images is None  # nothing states what an unnamed module learned from
    stated = _observer_metadata({"net": {}}, {"net": {"cue-conflict": run}}, {"net": {"training_images": 10}})["net"]
    assert (stated.parameters, stated.training_images) == (49_000, 10)
    assert stated.source == "metadata given; parameters counted from the module"


def test_read_metadata_accepts_a_mapping_and_fills_only_what_is_missing():
    stated = read_metadata({"m": {"training_images": "5e9", "training_kind": "image-text contrastive"}})["m"]
    assert stated == ModelMetadata(None, 5_000_000_000, "", "image-text contrastive", "metadata given")
    counted = ModelMetadata(parameters=86_000_000, training_images=1, source="counted")
    merged = stated.filled_from(counted)
    assert merged.parameters == 86_000_000 and merged.training_images == 5_000_000_000
    assert merged.source == "metadata given; counted"
    with pytest.raises(DataError, match="positive whole number"):
        read_metadata({"m": {"training_images": True}})


@pytest.mark.parametrize(
    ("tag", "data", "images", "kind"),
    [
        ("a1_in1k", "ImageNet-1k", 1_281_167, "supervised"),
        ("augreg_in21k_ft_in1k", "ImageNet-21k, then ImageNet-1k", 14_197_122, "supervised, then fine-tuned"),
        ("laion2b_ft_in12k_in1k", "LAION-2B, then ImageNet-12k, ImageNet-1k", 2_320_000_000,
         "image-text contrastive, then fine-tuned"),
        ("in12k_ft_in1k", "ImageNet-12k, then ImageNet-1k", None, "supervised, then fine-tuned"),
    ],
)  # fmt: skip
def test_a_timm_tag_names_the_training_data(tag, data, images, kind):
    found = _timm_training("vit_base_patch16_clip_224", tag)
    assert found is not None and (found.data, found.images, found.kind) == (data, images, kind)
    assert found.source == f"timm pretrained tag vit_base_patch16_clip_224.{tag}"


def test_a_timm_tag_whose_pretraining_is_not_known_says_nothing():
    """fb_ssl_yfcc100m_ft_in1k was pre-trained on YFCC-100M, not ImageNet-1k: better nothing than a wrong size."""
    assert _timm_training("resnet50", "fb_ssl_yfcc100m_ft_in1k") is None
    assert _timm_training("resnet50", None) is None


def test_a_timm_spec_entry_carries_its_tag(monkeypatch):
    pytest.importorskip("timm")
    from modelval.models.sources import timm_entry
    from modelval.models.specs import parse_spec

    entry = timm_entry(parse_spec("timm:resnet50.a1_in1k"))
    assert entry.training is not None and entry.training.data == "ImageNet-1k"
    assert entry.training.source == "timm pretrained tag resnet50.a1_in1k"
