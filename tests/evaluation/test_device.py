"""One owner of the device: load_model and evaluate agree on their defaults, "auto" is resolved once per
evaluation, a module is put where its inputs are fed (or refused in one line), and a device mismatch inside a
forward is reported as such, not as the user's code failing.

What needs a GPU (a real move to CUDA, a real CUDA/CPU mismatch) is in the ``gpu`` tests at the end; on a CPU-only
machine the meta device stands in for "another device" where torch allows it.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import modelval
from modelval.datasets.stimulus_set import StimulusSet
from modelval.errors import DeviceMismatchError, ModelvalError, UserCodeError, is_device_mismatch
from modelval.evaluation import category_probabilities, evaluate, model_outputs, output_key, place_model
from modelval.evaluation.forward import category_probabilities_by_aggregation
from modelval.models import loader, registry
from modelval.preprocessing import PreprocessConfig
from modelval.runtime import canonical_device, resolve_device

CONFIG = PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3, interpolation="bicubic")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none on this machine)")


def tiny_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(48, 1000)).eval()


@pytest.fixture
def subset(stimulus_subset) -> StimulusSet:
    """16 real stimuli (one per category), decoded without touching the user's decode cache."""
    return StimulusSet.load(stimulus_subset(1), allow_modified=True, progress=False, cache=False)


# --- the defaults ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "function",
    [loader.load_model, registry.load_model, registry.load_entry, evaluate, model_outputs, category_probabilities,
     category_probabilities_by_aggregation, output_key],
)  # fmt: skip
def test_every_public_default_device_is_auto(function):
    """``load_model`` defaulted to "cpu" and ``evaluate`` to "auto": on a GPU machine the two disagreed."""
    assert inspect.signature(function).parameters["device"].default == "auto"


def test_load_model_and_evaluate_agree_on_their_defaults(subset):
    loaded = modelval.load_model("efficientnet_lite0", progress=False)
    where = {canonical_device(p.device) for p in loaded.model.parameters()}
    assert where == {canonical_device(resolve_device("auto"))}
    result = modelval.evaluate(loaded.model, loaded.entry.preprocess.for_stimuli(None), subset, progress=False,
                               n_bootstrap=0)  # fmt: skip
    assert result.provenance["model_moved_from"] is None  # it was where its inputs are fed
    assert result.provenance["device"]["type"] == resolve_device("auto").type
    assert len(result.decisions) == 16


def test_load_model_uses_a_resolved_device_as_it_is(monkeypatch):
    """The front door resolves "auto" once and hands the torch.device down: the loader does not ask again."""
    seen = []
    real = torch.cuda.is_available
    monkeypatch.setattr(torch.cuda, "is_available", lambda: seen.append(1) or real())
    loaded = loader.load_model("efficientnet_lite0", device=torch.device("cpu"), progress=False)
    assert seen == [] and next(loaded.model.parameters()).device == torch.device("cpu")


@pytest.fixture
def resolutions(monkeypatch) -> list[object]:
    """Every string a modelval module resolves to a device from now on (the resolver is patched wherever it was
    imported), and every CUDA availability check made on the CPU-only path of "auto"."""
    import sys

    from modelval import runtime

    seen: list[object] = []
    real = runtime.resolve_device

    def counting(device="auto"):
        if isinstance(device, str):
            seen.append(device)
        return real(device)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("modelval") and getattr(module, "resolve_device", None) is real:
            monkeypatch.setattr(module, "resolve_device", counting)
    return seen


def test_auto_is_resolved_once_per_evaluation(subset, resolutions, monkeypatch):
    """evaluate() resolved "auto" three times (itself, the output key, the forward); now once."""
    model = tiny_model()
    evaluate(model, CONFIG, subset, device="auto", progress=False, n_bootstrap=0)
    assert resolutions == ["auto"]
    resolved = resolve_device("auto")  # as the front door does, once
    resolutions.clear()
    checks = []
    real = torch.cuda.is_available
    monkeypatch.setattr(torch.cuda, "is_available", lambda: checks.append(1) or real())
    evaluate(model, CONFIG, subset, device=resolved, progress=False, n_bootstrap=0)
    assert resolutions == [] and checks == []  # a torch.device is not resolved again, nor CUDA asked for


# --- placing the model -------------------------------------------------------------------------------------


def test_a_model_already_in_place_is_not_moved():
    model = tiny_model()
    pointers = [p.data_ptr() for p in model.parameters()]
    for device in (torch.device("cpu"), torch.device("cpu", 0)):  # a tensor says "cpu" even for "cpu:0"
        assert place_model(model, device) is None
    assert [p.data_ptr() for p in model.parameters()] == pointers


def test_a_model_on_another_device_is_moved_in_place():
    """CPU -> meta stands in for CPU -> CUDA: the same module object ends up on the evaluation device."""
    model = tiny_model()
    assert place_model(model, torch.device("meta")) == "cpu"
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert place_model(model, torch.device("meta")) is None


def test_a_plain_callable_is_left_where_it_is():
    model = tiny_model()
    assert place_model(lambda x: model(x), torch.device("meta")) is None
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_a_model_split_over_two_devices_is_refused_in_one_line():
    model = tiny_model()
    model[2].bias = torch.nn.Parameter(torch.zeros(1000, device="meta"))
    with pytest.raises(ModelvalError, match=r"several devices \(cpu, meta\).*model\.to\('cpu'\)") as error:
        place_model(model, torch.device("cpu"))
    assert "\n" not in str(error.value)
    with pytest.raises(ModelvalError, match="several devices"):  # through evaluate, before any forward
        category_probabilities(model, torch.zeros(2, 3, 8, 8, dtype=torch.uint8), CONFIG, device="cpu",
                               progress=False)  # fmt: skip


def test_a_model_without_values_is_refused_in_one_line(subset):
    with pytest.raises(ModelvalError, match="meta device") as error:
        evaluate(tiny_model().to("meta"), CONFIG, subset, device="cpu", progress=False, n_bootstrap=0)
    assert not isinstance(error.value, UserCodeError) and "\n" not in str(error.value)


def test_the_evaluation_records_where_the_model_was(subset):
    result = evaluate(tiny_model(), CONFIG, subset, device="cpu", progress=False, n_bootstrap=0)
    assert result.provenance["model_moved_from"] is None
    callable_result = evaluate(lambda x: tiny_model()(x), CONFIG, subset, device="cpu", progress=False, n_bootstrap=0)
    assert callable_result.provenance["model_moved_from"] is None


# --- a mismatch inside the forward -------------------------------------------------------------------------

MISMATCHES = [
    "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
    "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same or input should be "
    "a MKLDNN tensor and weight is a dense tensor",
    "Input type (CUDAFloatType) and weight type (CPUFloatType) should be the same",
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (when checking "
    "argument for argument mat1 in method wrapper_CUDA_addmm)",
    "Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0",
    "Tensor on device meta is not on the expected device cpu!",
    "Input and parameter tensors are not at the same device, found input tensor at cuda:0 and parameter tensor at cpu",
    "indices should be either on cpu or on the same device as the indexed tensor (cpu)",
]
NOT_MISMATCHES = [
    "Input type (double) and bias type (float) should be the same",
    "Input type (CUDABFloat16Type) and weight type (torch.cuda.FloatTensor) should be the same",
    "mat1 and mat2 shapes cannot be multiplied (2x48 and 47x1000)",
]


@pytest.mark.parametrize("message", MISMATCHES)
def test_torch_device_mismatches_are_recognised(message):
    assert is_device_mismatch(RuntimeError(message))


@pytest.mark.parametrize("message", NOT_MISMATCHES)
def test_other_errors_are_not_taken_for_a_mismatch(message):
    assert not is_device_mismatch(RuntimeError(message))
    assert not is_device_mismatch(ValueError(MISMATCHES[0]))  # only torch's RuntimeError


def _raises(message):
    def forward(x):
        raise RuntimeError(message)

    return forward


@pytest.mark.parametrize("message", MISMATCHES[:2])
def test_a_mismatch_in_the_forward_names_the_input_device_and_the_fix(message, subset):
    with pytest.raises(DeviceMismatchError) as error:
        evaluate(_raises(message), CONFIG, subset, device="cpu", progress=False, n_bootstrap=0)
    text = str(error.value)
    assert "\n" not in text and isinstance(error.value, ModelvalError)
    assert "fed the inputs on cpu" in text and "model.to('cpu')" in text and "device=" in text
    assert "should be the same" in text  # torch's own words are kept
    assert isinstance(error.value.__cause__, RuntimeError)


def test_a_real_mismatch_inside_a_callable_is_one_line():
    """A callable wrapping a layer left on another device: torch's real error, not a UserCodeError."""
    layer = torch.nn.Linear(3 * 8 * 8, 1000, device="meta")

    def wrapped(x):
        return layer(x.flatten(1))

    with pytest.raises(DeviceMismatchError, match="fed the inputs on cpu") as error:
        category_probabilities(wrapped, torch.zeros(2, 3, 8, 8, dtype=torch.uint8), CONFIG, device="cpu",
                               progress=False)  # fmt: skip
    assert "\n" not in str(error.value)


def test_another_error_of_the_forward_is_still_the_users():
    conv = torch.nn.Conv2d(3, 4, 3).double()  # a dtype mismatch, on one device

    def forward(x):
        return conv(x).flatten(1)

    with pytest.raises(UserCodeError, match=r"the forward of .* raised RuntimeError") as error:
        category_probabilities(forward, torch.zeros(2, 3, 8, 8, dtype=torch.uint8), CONFIG, device="cpu",
                               progress=False)  # fmt: skip
    assert not isinstance(error.value, DeviceMismatchError)


# --- on a GPU ------------------------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_the_defaults_agree_and_decide_as_on_the_cpu(subset):
    loaded = modelval.load_model("efficientnet_lite0", progress=False)
    assert {p.device.type for p in loaded.model.parameters()} == {"cuda"}
    config = loaded.entry.preprocess.for_stimuli(None)
    on_gpu = modelval.evaluate(loaded.model, config, subset, progress=False, n_bootstrap=0)
    assert on_gpu.provenance["model_moved_from"] is None and on_gpu.provenance["device"]["type"] == "cuda"
    cpu = modelval.load_model("efficientnet_lite0", device="cpu", progress=False)
    on_cpu = modelval.evaluate(cpu.model, config, subset, device="cpu", progress=False, n_bootstrap=0)
    flips = sum(a.response != b.response for a, b in zip(on_gpu.decisions, on_cpu.decisions, strict=True))
    assert flips <= 1, f"{flips} of 16 decisions differ between CUDA and CPU"  # cuDNN/TF32 rounding: one at most
    assert on_gpu.provenance["weights_sha256"] == on_cpu.provenance["weights_sha256"]


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_a_cpu_model_is_moved_and_runs(subset):
    from modelval.records.digests import DIGESTS_COMPUTED

    loaded = modelval.load_model("efficientnet_lite0", device="cpu", progress=False)
    config = loaded.entry.preprocess.for_stimuli(None)
    for device in ("cuda", torch.device("cuda", torch.cuda.current_device())):
        model = modelval.load_model("efficientnet_lite0", device="cpu", progress=False).model
        result = evaluate(model, config, subset, device=device, progress=False, n_bootstrap=0)
        assert result.provenance["model_moved_from"] == "cpu"
        assert {p.device.type for p in model.parameters()} == {"cuda"}
        before = DIGESTS_COMPUTED["weights"]
        again = evaluate(model, config, subset, device="cuda", progress=False, n_bootstrap=0)  # cuda == cuda:0
        assert again.provenance["model_moved_from"] is None and DIGESTS_COMPUTED["weights"] == before
        assert [d.response for d in again.decisions] == [d.response for d in result.decisions]
    assert result.provenance["weights_sha256"] == evaluate(
        loaded.model, config, subset, device="cpu", progress=False, n_bootstrap=0
    ).provenance["weights_sha256"]  # the digest of the same weights on the GPU and on the CPU


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_a_mismatch_inside_a_callable_is_one_line(subset):
    model = tiny_model()  # stays on the CPU: the callable hides it from the placement

    with pytest.raises(DeviceMismatchError, match="fed the inputs on cuda") as error:
        evaluate(lambda x: model(x), CONFIG, subset, device="cuda", progress=False, n_bootstrap=0)
    assert "\n" not in str(error.value)


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_the_batched_host_copies_give_the_cpu_digest():
    from modelval.records.digests import _tensors_digest, state_dict_digest

    model = tiny_model()
    expected = state_dict_digest(model)
    entries = sorted(model.cuda().state_dict(keep_vars=True).items())
    for chunk in (1000, 4096, 1 << 20):  # streamed in pieces; small tensors queued together; all in one buffer
        assert _tensors_digest(entries, chunk_bytes=chunk) == expected


# --- out of device memory (issue 28: a model that does not fit gets one line; a batch that does not is halved) --


class Roomy(torch.nn.Module):
    """A 1000-way linear head over pooled pixels that 'runs out of memory' above ``capacity`` images per batch.

    ``error`` is what it raises then: torch's own out-of-memory exception, or any other device error.
    """

    def __init__(self, capacity: int, error: type[BaseException] | None = None, message: str = "") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = torch.nn.Linear(3, 1000)
        self.capacity, self.error, self.message = capacity, error or torch.cuda.OutOfMemoryError, message
        self.batches: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(len(x))
        if len(x) > self.capacity:
            raise self.error(self.message or f"CUDA out of memory. Tried to allocate {len(x)} GiB")
        return self.head(x.mean(dim=(2, 3)))


def test_a_batch_that_runs_out_of_memory_is_run_again_at_half_the_size():
    images = torch.randint(0, 256, (40, 3, 8, 8), dtype=torch.uint8)
    expected, _ = model_outputs(Roomy(capacity=64), images, CONFIG, batch_size=32, device="cpu", progress=False)
    notes: list[str] = []
    model = Roomy(capacity=10)
    outputs, _ = model_outputs(model, images, CONFIG, batch_size=32, device="cpu", progress=False, memory_notes=notes)
    torch.testing.assert_close(torch.from_numpy(outputs), torch.from_numpy(expected), rtol=1e-5, atol=1e-6)
    assert notes == ["batch size 32 -> 16: out of memory on cpu", "batch size 16 -> 8: out of memory on cpu"]
    assert model.batches == [32, 16, 8, 8, 8, 8, 8]  # the smaller size is kept for the rest of the run


def test_a_model_that_does_not_fit_even_one_image_at_a_time_is_one_line():
    with pytest.raises(modelval.errors.OutOfMemory) as caught:
        model_outputs(Roomy(capacity=0), torch.zeros(4, 3, 8, 8, dtype=torch.uint8), CONFIG, batch_size=4,
                      device="cpu", progress=False)  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the forward of Roomy (")
    assert "ran out of memory on cpu" in message
    assert "OutOfMemoryError: CUDA out of memory" in message and "not even one image at a time fits" in message


def test_an_illegal_memory_access_is_never_retried():
    model = Roomy(capacity=0, error=RuntimeError, message="CUDA error: an illegal memory access was encountered")
    with pytest.raises(UserCodeError, match="illegal memory access") as caught:
        model_outputs(model, torch.zeros(8, 3, 8, 8, dtype=torch.uint8), CONFIG, batch_size=8, device="cpu",
                      progress=False)  # fmt: skip
    assert not isinstance(caught.value, modelval.errors.OutOfMemory)
    assert model.batches == [8]


def test_a_model_that_does_not_fit_in_memory_is_one_line_from_the_command_line(tmp_path, stimulus_subset, capsys):
    """The host's allocator refusing a petabyte is the CPU's out-of-memory (tests/test_gpu.py runs it on CUDA)."""
    from memory_helpers import does_not_fit

    line = does_not_fit("cpu", tmp_path, stimulus_subset, capsys)
    assert "DefaultCPUAllocator" in line
