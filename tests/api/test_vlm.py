"""A VLM of your own (``file.py:fn``) end to end, with a prompt sweep, and published response files at the door."""

from __future__ import annotations

import json

import pytest

from modelval.cli import main

STUB = '''
CALLS = []

def answer(image, prompt):
    """A stub VLM: the option letter of the image's mean-brightness bucket; refuses the texture question."""
    CALLS.append(prompt)
    assert image.mode == "RGB" and image.size == (224, 224)
    if "texture" in prompt:
        return "Sorry, I cannot help with that."
    if prompt.startswith("Describe"):
        return "A blurry photo of a cat."
    level = int(sum(image.convert("L").resize((1, 1), 2).tobytes()))
    return "ABCDEFGHIJKLMNOP"[level * 16 // 256] + "."
'''


@pytest.fixture
def stub(tmp_path):
    path = tmp_path / "vlm.py"
    path.write_text(STUB)
    return path


def test_a_file_vlm_runs_a_prompt_sweep(stub, stimulus_subset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)  # the suite turns caches off; this test needs it
    folder = stimulus_subset(2)
    prompt_file = tmp_path / "mine.txt"
    prompt_file.write_text("Which object's shape is this? A. airplane ... P. truck\n")
    args = ["shape-bias", "--vlm", f"{stub}:answer", "--data-root", str(folder), "--allow-modified-stimuli",
            "--bootstrap", "100", "--prompt", "vqa16", "--prompt", "texture16", "--prompt", "caption",
            "--prompt", str(prompt_file), "--json"]  # fmt: skip
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    rows = {row["prompt"]: row for row in payload["prompts"]}
    assert list(rows) == ["vqa16", "texture16", "caption", "mine"]
    assert rows["texture16"]["abstentions"] == 30 and rows["texture16"]["cue_accuracy"] == 0
    assert rows["texture16"]["shape_bias"] is None  # 0 / 0: no hits at all
    assert rows["caption"]["parser"] == "caption-names" and rows["vqa16"]["parser"] == "vqa"
    # "A blurry photo of a cat.": a shape hit on the cat-shaped conflicts, a texture hit on the cat-textured ones
    cats = rows["caption"]
    assert cats["shape_hits"] + cats["texture_hits"] + cats["other"] == 30 and cats["abstentions"] == 0
    assert rows["vqa16"]["shape_hits"] + rows["vqa16"]["texture_hits"] + rows["vqa16"]["other"] == 30
    for row in rows.values():  # one judge for every observer: below 30% cue-conflict accuracy, no shape bias
        withheld = row["cue_accuracy"] < 0.3
        assert row["status"] == ("withheld" if withheld else "finding") and row["passed"] is not withheld
        if withheld:
            assert row["shape_bias"] is None and row["reason"].startswith("NOT A WORKING CLASSIFIER")
    assert any(row["status"] == "withheld" for row in rows.values())
    assert payload["provenance"]["modelval"] and payload["provenance"]["vlm"]["callable"] == "answer"  # the environment
    assert [d["a"] for d in payload["differences"]] == ["texture16", "caption", "mine"]
    texture = payload["differences"][0]
    assert texture["cue_accuracy_difference"] == pytest.approx(-rows["vqa16"]["cue_accuracy"])
    assert texture["abstentions_difference"] == 30
    assert payload["answer_cache"] == "on" and all(row["answers_from_cache"] == 0 for row in rows.values())
    # the same run again: every answer from the cache (keyed by model file, prompt and stimulus bytes)
    assert main(args) == 0
    again = json.loads(capsys.readouterr().out)
    # every answer from the cache but the 3 asked again to show the stored ones are this VLM's (they agreed)
    assert [row["answers_from_cache"] for row in again["prompts"]] == [29, 29, 29, 29]
    assert all("all agreed" in row["answer_cache_check"] for row in again["prompts"])
    assert again["prompts"] == [
        {**row, "answers_from_cache": 29, "answer_cache_check": again["prompts"][0]["answer_cache_check"]}
        for row in payload["prompts"]
    ]
    # an edited VLM file is another model: asked again
    stub.write_text(STUB + "\n# edited\n")
    assert main([*args[:-1], "--json"]) == 0
    assert [row["answers_from_cache"] for row in json.loads(capsys.readouterr().out)["prompts"]] == [0, 0, 0, 0]


def test_the_table_names_the_abstention_rule(stub, stimulus_subset, capsys):
    args = ["shape-bias", "--vlm", f"{stub}:answer", "--data-root", str(stimulus_subset(1)), "--allow-modified-stimuli",
            "--bootstrap", "0", "--prompt", "vqa16", "--prompt", "shape16", "--no-cache"]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["prompt", "shape", "bias"]
    assert "shape16 - vqa16: shape bias" in out
    assert "abstentions: an answer with no class" in out


def test_a_vlm_that_returns_no_string_is_one_line(tmp_path, stimulus_subset, capsys):
    path = tmp_path / "bad.py"
    path.write_text("def answer(image, prompt):\n    return 3\n")
    args = ["shape-bias", "--vlm", f"{path}:answer", "--data-root", str(stimulus_subset(1)),
            "--allow-modified-stimuli", "--no-cache"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "returned int" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vlm", "x.py:f", "--model", "efficientnet_lite0"], "--model does not apply"),
        (["--prompt", "vqa16", "--model", "efficientnet_lite0"], "--prompt is for --vlm"),
        (["--parse", "vqa", "--model", "efficientnet_lite0"], "--parse re-reads a response file"),
    ],
)
def test_bad_combinations(args, message, capsys):
    assert main(["shape-bias", *args]) == 2
    assert message in capsys.readouterr().err


def test_published_response_file_by_pred_label_and_by_parse(vlm_shapebias_dir, capsys):
    path = vlm_shapebias_dir / "vlm" / "vqa" / "20240209_115809_gemini_pro_vision.csv"
    for extra in ([], ["--parse", "vqa"]):
        assert main(["shape-bias", "--decisions", str(path), "--bootstrap", "0", "--json", *extra]) == 0
        payload = json.loads(capsys.readouterr().out)
        assert payload["abstentions"] == 6 and payload["conflict_images"] == 1200
        assert round(payload["shape_bias"], 4) == 0.6407 and round(payload["cue_accuracy"], 4) == 0.8233
    captions = vlm_shapebias_dir / "vlm" / "captioning" / "20240214_122418_internvl_chat.csv"
    assert main(["shape-bias", "--decisions", str(captions), "--parse", "caption-judge", "--bootstrap", "0"]) == 0
    assert "abstentions: 307 of the 1200 conflict stimuli got no class" in capsys.readouterr().out


def test_prompt_search(vlm_shapebias_dir):
    import modelval

    rows = modelval.prompt_search(vlm_shapebias_dir / "prompt_search_results.csv", model="llava_1_6_vicuna_7b")
    assert len(rows) == 213
    from modelval.figures.shape_bias import plot_prompt_search

    figure = plot_prompt_search(rows, measured={"mine": (0.6, 0.8)})
    points = [len(collection.get_offsets()) for collection in figure.axes[0].collections]
    assert points == [213, 1]  # every published prompt of the model, and the measured one
    with pytest.raises(modelval.ModelvalError, match="no rows of the model 'gpt'"):
        modelval.prompt_search(vlm_shapebias_dir / "prompt_search_results.csv", model="gpt")


def test_a_published_vlm_is_an_observer_of_the_human_comparison(vlm_shapebias_dir, capsys):
    path = vlm_shapebias_dir / "vlm" / "vqa" / "20240205_201419_llava_1_6_vicuna_7b.csv"
    assert main(["humans", "--decisions", str(path), "--bootstrap", "0", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["dataset"] == "cue-conflict" and payload["images"] == 1280
    # 16-class accuracy against the shape category, over all 1,280 (the shape hits and the 80 no-conflict ones)
    with path.open(newline="", encoding="utf-8") as handle:
        import csv

        rows = list(csv.DictReader(handle))
    correct = sum(
        row["pred_label"] == "".join(c for c in row["image"].split("-")[0] if not c.isdigit()) for row in rows
    )
    assert payload["accuracy"] == pytest.approx(correct / 1280)
    assert -1 <= payload["error_consistency"] <= 1


def test_a_published_vlm_is_an_observer_of_the_benchmark(vlm_shapebias_dir, resnet50_reference_csv, capsys):
    """Issue 29, point 4: `modelval benchmark` takes a VLM's response file like any observer's decisions."""
    import csv

    path = vlm_shapebias_dir / "vlm" / "vqa" / "20240205_201419_llava_1_6_vicuna_7b.csv"
    argv = ["benchmark", "--decisions", f"llava:cue-conflict={path}", "--decisions",
            f"resnet50={resnet50_reference_csv}", "--bootstrap", "0", "--permutations", "0", "--json"]  # fmt: skip
    assert main(argv) == 0
    observers = {o["observer"]: o for o in json.loads(capsys.readouterr().out)["observers"]}
    assert set(observers) == {"llava", "resnet50"}
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    shapes = ["".join(c for c in row["image"].split("-")[0] if not c.isdigit()) for row in rows]
    correct = sum(row["pred_label"] == shape for row, shape in zip(rows, shapes, strict=True))
    llava = observers["llava"]["datasets"]["cue-conflict"]
    assert llava["n_trials"] == 1280 and llava["ood_accuracy"] == pytest.approx(correct / 1280)
    assert llava["ood_accuracy"] > observers["resnet50"]["aggregate"]["ood_accuracy"]  # 0.522 against 0.175
