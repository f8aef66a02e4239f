"""Golden outputs: random-init models through modelval's forward path, held to stored logits (framework drift).

A new torch, torchvision, timm or efficientnet-lite-pytorch that changes what a layer computes changes the
numbers modelval reports, and a published-weights check only sees it where a decision flips. These tests see
it in seconds on a CPU, as torchvision's ``test/expect`` and timm's ``test_model_inference`` do: small models at
random init, inputs made on the CPU from a seed, the logits stored in ``golden/<model>.npz`` (a few KB each).

- **The weights do not come from torch's initializers**, whose code changes between versions: every floating
  parameter and buffer is filled from a NumPy generator keyed by the seed and the tensor's name (integer
  buffers, such as a relative-position index, are the architecture's own). The golden file tests the forward,
  not the initializer.
- **The inputs** are uint8 images from a seeded NumPy generator, fed through
  :func:`modelval.evaluation.forward.model_outputs` (uint8 -> float, normalization, the forward) on the CPU.
- **Tolerances per dtype**: fp32 ``rtol 1e-3, atol 1e-4`` (timm's); bf16 autocast against the same fp32 logits
  ``atol 0.25`` in units of the logits' spread (torchvision's autocast allows ``prec 0.1`` on raw logits; the
  deepest model here, EfficientNet-Lite0, shows 0.17).

``MODELVAL_ACCEPT_GOLDEN=1 pytest tests/evaluation/test_golden.py`` rewrites the files deliberately (a framework
change that is understood); the diff of the ``.npz`` files and the versions stored in them say what moved.
"""

from __future__ import annotations

import contextlib
import functools
import os
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from modelval.evaluation.forward import model_outputs
from modelval.preprocessing import PreprocessConfig

GOLDEN = Path(__file__).parent / "golden"
ACCEPT_ENV = "MODELVAL_ACCEPT_GOLDEN"
SEED = 20260428
IMAGES, SIZE = 2, 64
FP32 = {"rtol": 1e-3, "atol": 1e-4}
#: bf16 keeps ~3 significant digits, and its error grows with depth: on logits scaled to unit spread, the largest
#: error measured here is 0.17 (EfficientNet-Lite0, 0.02-0.06 for the others); torchvision allows 0.1 on raw logits.
BF16_ATOL = 0.25


def _seed_of(name: str) -> int:
    return SEED ^ zlib.crc32(name.encode())


def fill_from_seed(model: torch.nn.Module) -> torch.nn.Module:
    """Every floating parameter and buffer from a NumPy generator keyed by its name (no torch initializer):
    weights ~ N(0, 2/fan_in) (He: deep ReLU nets keep their signal), biases and shifts ~ N(0, 0.02), norm scales
    ~ 1 + N(0, 0.1), running variances in [0.5, 1.5]."""
    with torch.no_grad():
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
            if not tensor.is_floating_point():
                continue
            rng = np.random.default_rng(_seed_of(name))
            shape = tuple(tensor.shape)
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_var":
                values = rng.uniform(0.5, 1.5, shape)
            elif tensor.ndim >= 2:
                fan_in = int(np.prod(shape[1:])) if tensor.ndim > 2 or "embed" not in name else shape[-1]
                values = rng.normal(0.0, np.sqrt(2.0 / max(fan_in, 1)), shape)
            elif leaf in ("weight", "gamma", "scale") or leaf.startswith("gamma"):
                values = 1.0 + rng.normal(0.0, 0.1, shape)
            else:
                values = rng.normal(0.0, 0.02, shape)
            tensor.copy_(torch.from_numpy(values.astype(np.float32)))
    return model.eval()


def _timm(name: str, **kwargs: object) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        timm = pytest.importorskip("timm", reason="the timm architectures need timm (pip install 'modelval[timm]')")
        return timm.create_model(name, pretrained=False, **kwargs)

    return build


def _torchvision_resnet18() -> torch.nn.Module:
    from torchvision.models import resnet18

    return resnet18(weights=None)


def _efficientnet_lite0() -> torch.nn.Module:
    lite = pytest.importorskip("efficientnet_lite_pytorch", reason="the bundled EfficientNet-Lite0 architecture")
    return lite.EfficientNet.from_name("efficientnet-lite0")


#: name -> (builder, preprocessing): each a small model (1-12 M parameters) with an ImageNet-1k head.
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], PreprocessConfig]] = {
    "torchvision_resnet18": (_torchvision_resnet18, PreprocessConfig()),
    "timm_convnext_atto": (_timm("convnext_atto"), PreprocessConfig()),
    "timm_vit_tiny": (_timm("vit_tiny_patch16_224", img_size=SIZE, depth=4), PreprocessConfig(mean=(0.5,) * 3,
                                                                                                std=(0.5,) * 3)),
    "timm_mobilenetv3_small_050": (_timm("mobilenetv3_small_050"), PreprocessConfig()),
    "efficientnet_lite0": (_efficientnet_lite0, PreprocessConfig(mean=(0.5,) * 3, std=(0.5,) * 3)),
}  # fmt: skip


def golden_inputs() -> torch.Tensor:
    """``IMAGES`` uint8 RGB images of ``SIZE`` px from a seeded NumPy generator (made on the CPU)."""
    rng = np.random.default_rng(SEED)
    return torch.from_numpy(rng.integers(0, 256, (IMAGES, 3, SIZE, SIZE), dtype=np.uint8))


@functools.cache
def seeded_model(name: str) -> torch.nn.Module:
    """The model ``name`` with its weights from :func:`fill_from_seed` (built once per session)."""
    return fill_from_seed(MODELS[name][0]())


def outputs(name: str, amp: str | None = None) -> np.ndarray:
    config = MODELS[name][1]
    model = seeded_model(name)
    logits, _ = model_outputs(model, golden_inputs(), config, batch_size=IMAGES, device="cpu", progress=False,
                              amp=amp)  # type: ignore[arg-type]  # fmt: skip
    return logits


def _versions() -> str:
    from importlib import metadata

    found = []
    for package in ("torch", "torchvision", "timm", "efficientnet-lite-pytorch"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{package} {metadata.version(package)}")
    return ", ".join(found)


def _stored(name: str) -> tuple[np.ndarray, str]:
    path = GOLDEN / f"{name}.npz"
    if os.environ.get(ACCEPT_ENV) == "1":
        GOLDEN.mkdir(exist_ok=True)
        np.savez_compressed(path, logits=outputs(name).astype(np.float32), versions=np.array(_versions()))
    if not path.is_file():
        pytest.fail(f"{path} is missing: {ACCEPT_ENV}=1 pytest {Path(__file__).name} writes it")
    with np.load(path) as stored:
        return stored["logits"], str(stored["versions"])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fp32_logits_match_the_golden_file(name):
    expected, made_with = _stored(name)
    actual = outputs(name)
    assert actual.shape == expected.shape == (IMAGES, 1000)
    np.testing.assert_allclose(
        actual, expected, **FP32,
        err_msg=f"{name}: fp32 logits moved (golden made with {made_with}; now {_versions()}). If the change is "
        f"understood, rewrite with {ACCEPT_ENV}=1",
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bf16_autocast_logits_stay_near_the_golden_fp32(name):
    expected, made_with = _stored(name)
    actual = outputs(name, amp="bf16")
    scale = float(expected.std())
    np.testing.assert_allclose(
        actual / scale, expected / scale, rtol=0, atol=BF16_ATOL,
        err_msg=f"{name}: bf16 autocast logits (in units of the logits' spread, {scale:.3g}) moved by more than "
        f"{BF16_ATOL} from the fp32 golden (made with {made_with}; now {_versions()})",
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_inputs_matter(name):
    """The stored logits are no constant that biases make: each image's logits spread, and the two images' logits
    differ by more than 0.3 of that spread somewhere (the weights keep the input's signal to the head)."""
    expected, _ = _stored(name)
    spread = float(expected.std())
    assert np.isfinite(expected).all() and (expected.std(axis=1) > 1e-2).all()
    assert np.abs(expected[0] - expected[1]).max() > 0.3 * spread


def test_a_changed_weight_fails_the_check():
    """A 1% change of the first convolution's weights moves the logits beyond the fp32 tolerance (the check can
    fail)."""
    name = "torchvision_resnet18"
    expected, _ = _stored(name)
    build, config = MODELS[name]
    model = fill_from_seed(build())
    with torch.no_grad():
        model.conv1.weight.mul_(1.01)
    logits, _ = model_outputs(model, golden_inputs(), config, batch_size=IMAGES, device="cpu", progress=False)
    assert not np.allclose(logits, expected, **FP32)


def test_the_fill_does_not_use_torch_initializers():
    """Two builds after different torch seeds get the same weights: the golden tests the forward only."""
    build = MODELS["torchvision_resnet18"][0]
    torch.manual_seed(1)
    first = fill_from_seed(build()).state_dict()
    torch.manual_seed(2)
    second = fill_from_seed(build()).state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
