"""The user's model code fails in one line: a factory file that does not import, a factory or a forward that
raises, an output that is no classifier's answer. Each message names the file, the callable and the
exception; the original exception stays chained (``__cause__``) for ``--debug``."""

from __future__ import annotations

import textwrap

import pytest
import torch

from modelval.errors import ModelOutputError, ModelvalError, UserCodeError
from modelval.evaluation import NonFiniteOutputError, category_probabilities
from modelval.models import load_model
from modelval.preprocessing import PreprocessConfig

NETS = textwrap.dedent(
    """
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self, mode="ok"):
            super().__init__()
            torch.manual_seed(0)
            self.pool = torch.nn.AdaptiveAvgPool2d(2)
            self.fc = torch.nn.Linear(12, 1000)
            self.mode = mode

        def forward(self, x):
            y = self.fc(self.pool(x).flatten(1))
            if self.mode == "nan":
                return y * float("nan")
            if self.mode == "inf-row":
                y[1] = float("inf")
                return y
            if self.mode == "1d":
                return y[:, 0]
            if self.mode == "str":
                return "hello"
            if self.mode == "raise":
                raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x150528 and 3072x1000)")
            return y

    def make(mode="ok"):
        return Tiny(mode)

    def raises():
        raise RuntimeError("factory exploded")
    """
)

IMAGES = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8)


@pytest.fixture
def nets(tmp_path):
    path = tmp_path / "nets.py"
    path.write_text(NETS)
    return path


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('raise ImportError("boom at import")\n', r"importing .*broken\.py \(for make\(\)\) raised ImportError: boom"),
        ("def make(:\n", r"importing .*broken\.py \(for make\(\)\) raised SyntaxError: invalid syntax"),
        ("import no_such_module_here\n", r"raised ModuleNotFoundError: No module named 'no_such_module_here'"),
    ],
)
def test_a_factory_file_that_does_not_import_is_one_line(tmp_path, source, expected):
    (tmp_path / "broken.py").write_text(source)
    with pytest.raises(UserCodeError, match=expected) as caught:
        load_model(f"{tmp_path / 'broken.py'}:make", progress=False)
    _one_line(caught.value)
    assert caught.value.__cause__ is not None  # the original, for --debug
    # a failed import leaves no half-imported module behind: the fixed file imports on the next try
    (tmp_path / "broken.py").write_text(NETS)
    assert load_model(f"{tmp_path / 'broken.py'}:make", progress=False).model is not None


def test_a_factory_that_raises_names_the_file_and_the_callable(nets):
    with pytest.raises(UserCodeError) as caught:
        load_model(f"{nets}:raises", progress=False)
    assert _one_line(caught.value) == f"the model factory {nets}:raises() raised RuntimeError: factory exploded"
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_module_path_factory_that_raises_at_import(tmp_path, monkeypatch):
    (tmp_path / "zoo_that_fails.py").write_text('raise ValueError("bad config at import")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserCodeError, match=r"importing zoo_that_fails \(for make\(\)\) raised ValueError: bad"):
        load_model("zoo_that_fails:make", progress=False)
    with pytest.raises(ModelvalError, match=r"cannot import 'no_such_zoo'"):  # a missing module is no user error
        load_model("no_such_zoo:make", progress=False)


def _model(nets, mode: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("nets_under_test", nets)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make(mode)


@pytest.mark.parametrize(
    ("mode", "error", "expected"),
    [
        ("raise", UserCodeError, r"the forward of Tiny \(.*nets\.py\) raised RuntimeError: mat1 and mat2 shapes"),
        ("1d", ModelOutputError, r"Tiny \(.*nets\.py\) returned a tensor of shape \(4,\) for a batch of 4 images"),
        ("str", ModelOutputError, r"Tiny \(.*nets\.py\) returned str, expected a logits tensor \(4, classes\)"),
        ("nan", NonFiniteOutputError, r"returned NaN logits for 4 of the 4 images of a batch \(#0, #1, #2, \.\.\.\)"),
        ("inf-row", NonFiniteOutputError, r"returned infinite logits for 1 of the 4 images of a batch \(#1\)"),
    ],
)
def test_a_forward_that_fails_or_returns_no_decision_is_refused_by_name(nets, mode, error, expected):
    model = _model(nets, mode)
    with pytest.raises(error, match=expected) as caught:
        category_probabilities(model, IMAGES, PreprocessConfig(), device="cpu", progress=False)
    _one_line(caught.value)
    assert isinstance(caught.value, ModelvalError)


def test_nan_outputs_never_become_airplane_decisions(nets, modelval_stimulus_set):
    """Today's code turned an all-NaN row into argmax 0 = "airplane" and passed the sanity gate."""
    from modelval.datasets.stimulus_set import StimulusSet
    from modelval.evaluation import evaluate

    subset = StimulusSet(
        modelval_stimulus_set.root, modelval_stimulus_set.stimuli[:8], modelval_stimulus_set.images[:8]
    )
    with pytest.raises(NonFiniteOutputError, match=r"\(airplane1-bicycle2\.png, airplane1-chair2\.png, ") as caught:
        evaluate(_model(nets, "nan"), PreprocessConfig(), subset, device="cpu", progress=False, n_bootstrap=0)
    assert caught.value.images == list(range(8))


def test_sensitivity_refuses_a_nan_model_instead_of_printing_a_shape_bias(nets, modelval_stimulus_set):
    from modelval.api.protocol import sensitivity_card
    from modelval.datasets.stimulus_set import StimulusSet

    subset = StimulusSet(
        modelval_stimulus_set.root, modelval_stimulus_set.stimuli[:8], modelval_stimulus_set.images[:8]
    )
    with pytest.raises(NonFiniteOutputError, match="returned NaN logits"):
        sensitivity_card(_model(nets, "nan"), PreprocessConfig(), subset, device="cpu", n_bootstrap=0)
