"""The provenance record: what every result says produced it, and the digests that identify weights.

docs/provenance.md documents every field; a test holds the page and a real record against each other.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest
import torch

from modelval.records.digests import state_dict_digest
from modelval.records.provenance import SCHEMA_VERSION, environment, git_state, json_digest

ROOT = Path(__file__).resolve().parents[2]  # tests/records/<this file> -> the checkout
PAGE = ROOT / "docs" / "provenance.md"


def test_state_dict_digest_is_the_sha256_of_names_dtypes_shapes_and_bytes():
    torch.manual_seed(0)
    layer = torch.nn.Linear(2, 3)
    expected = hashlib.sha256()
    for name in ("bias", "weight"):  # in name order
        tensor = getattr(layer, name).detach()
        expected.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        expected.update(tensor.numpy().tobytes())
    assert state_dict_digest(layer) == expected.hexdigest()
    same = torch.nn.Linear(2, 3)
    same.load_state_dict(layer.state_dict())
    assert state_dict_digest(same) == state_dict_digest(layer)
    with torch.no_grad():
        same.bias[1] = torch.nextafter(same.bias[1], torch.tensor(10.0))  # one value, one ulp
    assert state_dict_digest(same) != state_dict_digest(layer)
    assert state_dict_digest(layer.double()) != state_dict_digest(torch.nn.Linear(2, 3))  # the dtype counts
    assert state_dict_digest(lambda x: x) is None


def test_json_digest_ignores_key_order():
    assert json_digest({"a": 1, "b": [1, 2]}) == json_digest({"b": [1, 2], "a": 1})
    assert json_digest({"a": 1}) != json_digest({"a": 2})


def test_environment_names_the_versions_and_the_checkout():
    record = environment()
    assert record["schema_version"] == SCHEMA_VERSION
    assert record["packages"]["torch"] == torch.__version__.split("+")[0]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a checkout (CI clones one): the record names its commit
        assert git_state() is not None and git_state()["commit"] == head.stdout.strip()
    json.dumps(record)  # JSON-ready


def _documented_fields() -> set[str]:
    """The field names in the first column of docs/provenance.md's tables (`a.b` for nested ones)."""
    return set(re.findall(r"^\| `([\w.]+)` \|", PAGE.read_text(), flags=re.M))


def _paths(record: dict, prefix: str = "") -> set[str]:
    found = set()
    for key, value in record.items():
        path = f"{prefix}{key}"
        found.add(path)
        if isinstance(value, dict) and key not in ("packages", "sources"):
            found |= _paths(value, f"{path}.")
    return found


@pytest.mark.slow
def test_a_model_run_carries_every_documented_field(modelval_data_root, stimulus_subset):
    import modelval

    report = modelval.shape_bias(
        "efficientnet_lite0", data_root=stimulus_subset(2), allow_modified_stimuli=True, bootstrap=0, device="cpu"
    )
    record = report.to_dict()["provenance"]
    documented = _documented_fields()
    assert _paths(record) <= documented, sorted(_paths(record) - documented)  # every field is documented
    # fields of other results (a decision file, humans, calibration, rescore) or of a checkout
    elsewhere = {"decisions_file", "decisions_file.path", "decisions_file.sha256", "reference_dir", "input",
                 "input.path", "input.sha256", "saved_outputs", "saved_run", "git.commit", "git.dirty"}  # fmt: skip
    assert documented <= _paths(record) | elsewhere, sorted(documented - _paths(record) - elsewhere)
    assert record["model"]["spec"] == "efficientnet_lite0" and len(record["weights_sha256"]) == 64
    assert record["stimuli"]["images"] == 32 and record["stimuli"]["verification"].startswith("modified")
    assert record["preprocessing"]["sources"]["mean"] == "registry entry efficientnet_lite0"


def test_a_decision_file_result_names_the_file_and_its_digest(modelval_reference_dir):
    import modelval

    path = modelval_reference_dir / "style-transfer-512-nomask-experiment_resnet50_session-1.csv"
    record = modelval.shape_bias_of_decisions(path, bootstrap=0).to_dict()["provenance"]
    assert record["decisions_file"] == {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert record["schema_version"] == SCHEMA_VERSION
