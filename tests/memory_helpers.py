"""A model that cannot fit in any device's memory, run through the command line (CPU and GPU tiers share it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HUGE = """
import torch


class Huge(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(3, 1000)

    def forward(self, x):
        # a network whose activations need a petabyte, at any batch size
        scratch = torch.empty(1 << 50, dtype=torch.uint8, device=x.device)
        return self.head(x.float().mean(dim=(2, 3))) + scratch[:1].float()


def huge():
    return Huge()
"""


def does_not_fit(device: str, tmp_path: Path, stimulus_subset: Any, capsys: Any) -> str:
    """Run ``modelval shape-bias`` on the huge model on ``device``: exit 2, one line (returned), no traceback."""
    from modelval.cli import main

    (tmp_path / "nets.py").write_text(HUGE)
    argv = [
        "shape-bias", "--model", f"{tmp_path / 'nets.py'}:huge", "--data-root", str(stimulus_subset(1)),
        "--allow-modified-stimuli", "--device", device, "--mean", "0.5,0.5,0.5", "--std", "0.5,0.5,0.5",
        "--no-cache",
    ]  # fmt: skip
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and f"ran out of memory on {device}" in err, err
    assert "not even one image at a time fits" in err and "Traceback" not in err
    return err
