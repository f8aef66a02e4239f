"""The weights, architecture and stimuli digests: their values, and that each is computed once per object and
computed again exactly when what it identifies may have changed (modelval.records.digests)."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from modelval.records import digests as provenance
from modelval.records.digests import (
    DIGESTS_COMPUTED,
    _tensors_digest,
    architecture_digest,
    forget_digests,
    state_dict_digest,
    values_kept,
)

SRC = Path(__file__).resolve().parents[2] / "src"


def reference_digest(model: torch.nn.Module) -> str:
    """The digest as modelval computed it before it was remembered: one host copy and one ``tobytes`` per tensor.

    The cached digest must keep this value: it keys every stored output and is recorded as ``weights_sha256``.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


class Mixed(torch.nn.Module):
    """Every kind of tensor a state dict holds: float and bfloat16 parameters, a transposed (non-contiguous)
    parameter, integer and bool buffers, an empty tensor, a scalar."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)  # num_batches_tracked: int64
        self.low = torch.nn.Parameter(torch.randn(5, 7).to(torch.bfloat16))
        self.transposed = torch.nn.Parameter(torch.randn(6, 9).t())
        self.register_buffer("mask", torch.rand(11) > 0.5)
        self.register_buffer("empty", torch.empty(0, 3))
        self.register_buffer("scale", torch.tensor(2.5))


def count(kind: str) -> int:
    return DIGESTS_COMPUTED[kind]


# --- the value ---------------------------------------------------------------------------------------------


def test_the_digest_value_is_the_one_modelval_always_recorded():
    model = Mixed()
    assert not model.transposed.is_contiguous()
    assert state_dict_digest(model) == reference_digest(model)


@pytest.mark.parametrize("chunk", [1, 7, 100, 1 << 20])
def test_batched_host_copies_give_the_same_digest(chunk):
    """The pinned-buffer path of GPU tensors (small tensors queued together, large ones streamed in pieces),
    run here on CPU tensors: every buffer size gives the digest of the tensors one by one."""
    model = Mixed()
    entries = sorted(model.state_dict(keep_vars=True).items())
    assert _tensors_digest(entries, staged=("cpu",), chunk_bytes=chunk) == reference_digest(model)


def test_a_model_without_a_state_dict_has_no_digest():
    assert state_dict_digest(lambda x: x) is None


def test_weights_on_the_meta_device_are_refused_in_one_line():
    with pytest.raises(provenance.ModelvalError, match="meta device") as error:
        state_dict_digest(torch.nn.Linear(2, 3, device="meta"))
    assert "\n" not in str(error.value)


# --- computed once, computed again on a change -------------------------------------------------------------


def test_a_second_digest_of_the_same_model_is_not_computed():
    model = Mixed()
    before = count("weights")
    first = state_dict_digest(model)
    assert count("weights") == before + 1
    assert state_dict_digest(model) == first
    assert count("weights") == before + 1  # remembered, not hashed again


def test_an_in_place_change_gives_a_new_digest():
    model = torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    with torch.no_grad():
        model.bias.add_(1)
    before = count("weights")
    assert state_dict_digest(model) != first
    assert count("weights") == before + 1


def test_load_state_dict_gives_a_new_digest():
    model, other = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    model.load_state_dict(other.state_dict())
    assert state_dict_digest(model) == reference_digest(other) != first
    # the same values loaded again: hashed again (a write happened), the same value
    before = count("weights")
    model.load_state_dict(other.state_dict())
    assert state_dict_digest(model) == reference_digest(other)
    assert count("weights") == before + 1


def test_a_replaced_parameter_gives_a_new_digest():
    model = torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    model.weight = torch.nn.Parameter(model.weight.detach() + 1)
    assert state_dict_digest(model) == reference_digest(model) != first


def test_data_swapped_under_the_same_parameter_gives_a_new_digest():
    model = torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    model.weight.data = torch.zeros(3, 4)  # the same Parameter object, other storage
    assert state_dict_digest(model) == reference_digest(model) != first


def test_another_dtype_gives_a_new_digest():
    model = torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    model.double()
    assert state_dict_digest(model) == reference_digest(model) != first


def test_a_write_through_data_is_seen_only_after_forget_digests():
    """The documented limit: ``tensor.data`` has its own version counter, so torch does not count the write."""
    model = torch.nn.Linear(4, 3)
    first = state_dict_digest(model)
    model.bias.data.add_(1)
    assert state_dict_digest(model) == first  # not seen: the remembered digest is stale here
    forget_digests(model)
    assert state_dict_digest(model) == reference_digest(model) != first


def test_values_kept_carries_the_digest_over_a_layout_change():
    model = torch.nn.Conv2d(3, 8, 3)
    first = state_dict_digest(model)
    with values_kept(model):
        model.to(memory_format=torch.channels_last)
    before = count("weights")
    assert state_dict_digest(model) == first
    assert count("weights") == before
    assert state_dict_digest(model) == reference_digest(model)  # and it is the true value


def test_values_kept_does_not_vouch_for_a_stale_digest():
    model = torch.nn.Conv2d(3, 8, 3)
    state_dict_digest(model)
    with torch.no_grad():
        model.bias.add_(1)  # changed before the block: the remembered digest is no longer valid
    with values_kept(model):
        model.to(memory_format=torch.channels_last)
    assert state_dict_digest(model) == reference_digest(model)


def test_a_forgotten_model_leaves_nothing_behind():
    model = torch.nn.Linear(4, 3)
    state_dict_digest(model)
    architecture_digest(model)
    assert model in provenance._WEIGHTS and model in provenance._ARCHITECTURES
    gc.collect()  # earlier tests' models that only a reference cycle kept go now, not in the count below
    held = len(provenance._WEIGHTS), len(provenance._ARCHITECTURES)
    del model
    gc.collect()
    assert (len(provenance._WEIGHTS), len(provenance._ARCHITECTURES)) == (held[0] - 1, held[1] - 1)


# --- the architecture ------------------------------------------------------------------------------------


def reference_architecture(model: object) -> str:
    import inspect

    cls = type(model)
    digest = hashlib.sha256(f"{cls.__module__}.{cls.__qualname__}|{model!r}|".encode())
    digest.update(Path(inspect.getsourcefile(cls)).read_bytes())
    return digest.hexdigest()


def test_the_architecture_digest_is_computed_once_and_keeps_its_value():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    before = count("architecture")
    assert architecture_digest(model) == reference_architecture(model)
    assert architecture_digest(model) == reference_architecture(model)
    assert count("architecture") == before + 1


def test_a_changed_module_tree_gives_a_new_architecture_digest():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout(0.1))
    first = architecture_digest(model)
    model[1].p = 0.5  # a setting the repr shows, changed in place
    assert architecture_digest(model) != first
    model.append(torch.nn.ReLU())
    assert architecture_digest(model) == reference_architecture(model)


def test_an_edited_source_file_gives_a_new_architecture_digest(tmp_path, monkeypatch):
    path = tmp_path / "nets.py"
    path.write_text("import torch\n\nclass Net(torch.nn.Linear):\n    pass\n")
    spec = importlib.util.spec_from_file_location("modelval_test_nets", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "modelval_test_nets", module)  # as a factory file is imported
    spec.loader.exec_module(module)
    model = module.Net(4, 3)
    first = architecture_digest(model)
    assert first == reference_architecture(model)
    path.write_text(path.read_text() + "# the forward's file changed\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    assert architecture_digest(model) != first


def test_a_class_without_a_source_file_is_identified_by_its_name_and_tree(monkeypatch):
    """``inspect`` raises OSError for a class of ``__main__`` run from ``python -c``; the digest still works."""
    import inspect

    def no_source(cls):
        raise OSError("source code not available")

    monkeypatch.setattr(inspect, "getsourcefile", no_source)
    model = torch.nn.Linear(4, 3)
    expected = hashlib.sha256(f"torch.nn.modules.linear.Linear|{model!r}|".encode()).hexdigest()
    assert architecture_digest(model) == expected


def test_a_model_defined_in_python_c_can_be_digested_and_named():
    """The real case: a class defined on the command line has no source file (OSError from inspect)."""
    code = (
        "import torch\n"
        "from modelval.records.digests import architecture_digest\n"
        "from modelval.evaluation.forward import describe_model\n"
        "class Net(torch.nn.Linear):\n"
        "    def forward(self, x):\n"
        "        return super().forward(x)\n"
        "print(len(architecture_digest(Net(2, 3))), describe_model(Net(2, 3)))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["64", "Net"]


# --- the stimuli -------------------------------------------------------------------------------------------


def test_the_stimuli_digest_is_computed_once_per_set(few_stimuli):
    from modelval.datasets.stimuli import Stimulus
    from modelval.datasets.stimulus_set import StimulusSet

    stimuli = [Stimulus(f"s{i}.png", "cat", "dog") for i in range(len(few_stimuli))]
    in_memory = StimulusSet(Path("."), stimuli, few_stimuli.clone())  # no file digests: the pixels are hashed
    before = count("stimuli")
    first = in_memory.content_digest()
    assert in_memory.content_digest() == first and in_memory.provenance()["content_sha256"] == first
    assert count("stimuli") == before + 1
    in_memory.images[0, 0, 0, 0] += 1  # a pixel written in place
    assert in_memory.content_digest() != first
    fewer = dataclasses.replace(in_memory, stimuli=stimuli[:-1], images=in_memory.images[:-1])
    assert fewer.content_digest() != in_memory.content_digest()
    assert count("stimuli") == before + 3


def test_a_set_with_its_digest_remembered_can_be_pickled(few_stimuli):
    """The runner sends the set to Ray workers (ray.put pickles it): the remembered digest must not stop that."""
    import pickle

    from modelval.datasets.stimuli import Stimulus
    from modelval.datasets.stimulus_set import StimulusSet

    stimuli = [Stimulus(f"s{i}.png", "cat", "dog") for i in range(len(few_stimuli))]
    original = StimulusSet(Path("."), stimuli, few_stimuli.clone())
    digest = original.content_digest()
    copy = pickle.loads(pickle.dumps(original))
    assert torch.equal(copy.images, original.images) and copy.content_digest() == digest
