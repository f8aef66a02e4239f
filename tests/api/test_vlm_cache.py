"""The answer cache serves a VLM's stored answers only when it can show they are this VLM's (issue 42 point 1).

Each case is a VLM that changes where the key cannot see (a callable object's argument, an environment
variable, a helper module), or a hand-edited answer file: the second run must score the VLM as it answers now.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from modelval.cli import main

OBJECT_VLM = '''
class VLM:
    """A wrapper object, as VLMs usually are: it always answers the option letter it was built with."""

    def __init__(self, letter):
        self.letter = letter

    def __call__(self, image, prompt):
        return self.letter + "."

answer = VLM("{letter}")
'''

ENV_VLM = '''
import os

def answer(image, prompt):
    """The wrapper picks its "checkpoint" from the environment: here, the letter it answers."""
    return os.environ["TEST_VLM_LETTER"] + "."
'''

HELPER_VLM = '''
import sys
sys.path.insert(0, {folder!r})
import vlm_helper

def answer(image, prompt):
    return vlm_helper.LETTER + "."
'''


@pytest.fixture
def caching(tmp_path, monkeypatch):
    monkeypatch.setenv("MODELVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MODELVAL_NO_CACHE", raising=False)  # the suite turns caches off; these tests need it
    return tmp_path / "cache" / "answers"


def forget(path):
    """Drop the imported copy of a VLM file: each command of the CLI is a process of its own, importing it afresh."""
    for name, module in list(sys.modules.items()):
        if name.startswith("modelval_user_") and getattr(module, "__file__", None) == str(path.resolve()):
            del sys.modules[name]


def run(spec, folder, capsys):
    args = ["shape-bias", "--vlm", spec, "--data-root", str(folder), "--allow-modified-stimuli", "--bootstrap", "0",
            "--prompt", "vqa16", "--json"]  # fmt: skip
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def truth(spec, folder, capsys):
    """The VLM scored with no cache at all."""
    args = ["shape-bias", "--vlm", spec, "--data-root", str(folder), "--allow-modified-stimuli", "--bootstrap", "0",
            "--prompt", "vqa16", "--json", "--no-cache"]  # fmt: skip
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)["prompts"][0]


def scores(payload):
    row = payload["prompts"][0]
    return row["shape_hits"], row["texture_hits"], row["abstentions"]


def test_an_edited_callable_object_is_another_vlm(caching, tmp_path, stimulus_subset, capsys):
    folder, path = stimulus_subset(1), tmp_path / "objvlm.py"
    path.write_text(OBJECT_VLM.format(letter="B"))  # bear
    first = run(f"{path}:answer", folder, capsys)
    assert first["prompts"][0]["answers_from_cache"] == 0
    path.write_text(OBJECT_VLM.format(letter="K"))  # dog: today's key has no digest of this file
    forget(path)
    second = run(f"{path}:answer", folder, capsys)
    assert scores(second) == scores({"prompts": [truth(f"{path}:answer", folder, capsys)]})
    assert scores(second) != scores(first)
    assert second["prompts"][0]["answers_from_cache"] == 0


def test_a_vlm_changed_through_the_environment_is_asked_again(caching, tmp_path, stimulus_subset, capsys, monkeypatch):
    folder, path = stimulus_subset(1), tmp_path / "envvlm.py"
    path.write_text(ENV_VLM)
    monkeypatch.setenv("TEST_VLM_LETTER", "B")
    first = run(f"{path}:answer", folder, capsys)
    again = run(f"{path}:answer", folder, capsys)  # the same VLM: served, after the re-ask agreed
    assert scores(again) == scores(first)
    assert again["prompts"][0]["answers_from_cache"] > 0
    assert "agreed" in again["prompts"][0]["answer_cache_check"]
    monkeypatch.setenv("TEST_VLM_LETTER", "K")
    changed = run(f"{path}:answer", folder, capsys)
    assert scores(changed) == scores({"prompts": [truth(f"{path}:answer", folder, capsys)]}) != scores(first)
    assert changed["prompts"][0]["answers_from_cache"] == 0
    assert "answered otherwise" in changed["prompts"][0]["answer_cache_check"]
    assert "environment" in changed["answer_cache_not_covered"]


def test_an_edited_helper_module_is_caught_by_the_re_ask(caching, tmp_path, stimulus_subset, capsys):
    folder, helpers = stimulus_subset(1), tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "vlm_helper.py").write_text('LETTER = "B"\n')
    path = tmp_path / "wrapped.py"
    path.write_text(HELPER_VLM.format(folder=str(helpers)))
    first = run(f"{path}:answer", folder, capsys)
    (helpers / "vlm_helper.py").write_text('LETTER = "K"\n')
    forget(path)
    sys.modules.pop("vlm_helper", None)  # the spec's file is imported afresh; so is its helper, edited
    second = run(f"{path}:answer", folder, capsys)
    assert scores(second) != scores(first)
    assert second["prompts"][0]["answers_from_cache"] == 0


def test_a_hand_edited_answer_file_is_not_served(caching, tmp_path, stimulus_subset, capsys):
    folder, path = stimulus_subset(1), tmp_path / "objvlm.py"
    path.write_text(OBJECT_VLM.format(letter="B"))
    first = run(f"{path}:answer", folder, capsys)
    (entry,) = caching.glob("*.json")
    record = json.loads(entry.read_text())
    for stored in record["answers"].values():
        stored["answer"] = "K."  # every answer edited by hand, the record's key and model untouched
    entry.write_text(json.dumps(record))
    second = run(f"{path}:answer", folder, capsys)
    assert scores(second) == scores(first)
    assert second["prompts"][0]["answers_from_cache"] == 0


def test_a_callable_without_a_source_file_is_not_cached_and_says_so(caching, stimulus_subset):
    import functools

    import modelval

    vlm = functools.partial(str.format, "B.")  # "B.".format(image, prompt): no source file anywhere
    folder = stimulus_subset(1)
    report = modelval.vlm_shape_bias(vlm, ["vqa16"], data_root=folder, allow_modified_stimuli=True, bootstrap=0,
                                     name="partial")  # fmt: skip
    again = modelval.vlm_shape_bias(vlm, ["vqa16"], data_root=folder, allow_modified_stimuli=True, bootstrap=0,
                                    name="partial")  # fmt: skip
    status = report.to_dict()["answer_cache"]
    assert status.startswith("off: ") and "\n" not in status and "source file" in status
    assert again.prompts[0].cached == 0
    assert not caching.exists() or not list(caching.glob("*.json"))


def test_the_answer_store_keeps_its_limit_even_when_nothing_is_written(caching, tmp_path, stimulus_subset, capsys,
                                                                        monkeypatch):  # fmt: skip
    folder, path = stimulus_subset(1), tmp_path / "objvlm.py"
    path.write_text(OBJECT_VLM.format(letter="B"))
    run(f"{path}:answer", folder, capsys)
    for number in range(12):  # other VLMs' answer files, 3 MiB in all (made as the store makes them)
        from modelval.records.answer_cache import AnswerCache

        cache = AnswerCache({"spec": f"other{number}"}, "p", root=caching)
        cache.put("x.png", "0" * 64, "A" * (256 * 1024))
        cache.flush()
        os.utime(cache.path, (1, 1))  # long unused
    monkeypatch.setenv("MODELVAL_CACHE_SIZE", "1M")
    run(f"{path}:answer", folder, capsys)  # every answer stored: nothing is written, yet the limit holds
    assert sum(p.stat().st_size for p in caching.iterdir()) <= 1024**2


def test_the_docs_state_what_the_answer_key_cannot_see():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "provenance.md").read_text()
    assert "## The answer cache" in text
    section = text.split("## The answer cache", 1)[1].split("\n## ", 1)[0]
    for words in ("environment", "re-ask", "no source file"):
        assert words in section, words
