"""Small ``nn.Module`` wrappers that give every source the same call: ``model(batch) -> logits``.

Kept apart from the registry modules, which must not import torch when they are read (listing the
models, parsing a spec); these load when a model is built.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class LogitsOf(nn.Module):
    """Makes a transformers classifier return its logits tensor, like every other entry's model."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """The wrapped model's logits.

        Parameters
        ----------
        pixel_values
            Preprocessed images, ``(N, 3, H, W)``.
        """
        return self.inner(pixel_values=pixel_values).logits


class ExportedModule(nn.Module):
    """An exported program's module behind a plain ``nn.Module``: ``eval()`` must not reach it.

    ``ExportedProgram.module()`` refuses ``train()``/``eval()`` (the graph is already specialised);
    the program is kept outside the module tree so ``.eval()`` here is a no-op for it.
    """

    def __init__(self, program: nn.Module) -> None:
        super().__init__()
        self.__dict__["program"] = program

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """The exported program's output.

        Parameters
        ----------
        inputs
            Preprocessed images, ``(N, 3, H, W)``.
        """
        return self.__dict__["program"](inputs)

    def to(self, *args: Any, **kwargs: Any) -> ExportedModule:
        """Move the exported program too (kept outside the module tree, ``nn.Module.to`` would not reach it).

        Parameters
        ----------
        *args, **kwargs
            As ``nn.Module.to``.
        """
        self.__dict__["program"] = self.__dict__["program"].to(*args, **kwargs)
        return self
