"""The answer cache: a vision-language model's text answers, keyed by model, prompt and stimulus.

A VLM answers slowly (seconds per image) and its answers are text, not an array, so they are kept beside
the output cache rather than in it: one JSON file per (model, prompt) pair, mapping each stimulus (its
relative path and the SHA-256 of its bytes) to the answer. A stimulus whose bytes change is asked again;
an interrupted run keeps every answer written so far (the file is rewritten whole, atomically, every
:data:`FLUSH_EVERY` answers and at the end).

The model's identity is the caller's: for a ``file.py:fn`` VLM it is the spec, the function's name and the
SHA-256 of the file that defines it (an edited file asks again). Location: ``$MODELVAL_OUTPUT_CACHE`` (or
the per-user cache) ``/answers``; ``MODELVAL_NO_OUTPUT_CACHE=1`` turns it off, as for outputs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from modelval.atomic import write_text
from modelval.errors import ModelvalError
from modelval.records.output_cache import default_output_cache_dir
from modelval.records.provenance import json_digest

#: Answers written to disk at least this often during a run (an interrupted run loses fewer).
FLUSH_EVERY = 16


class AnswerCache:
    """Answers of one (model, prompt) pair: ``get(stimulus, digest)``, ``put(...)``, ``flush()``."""

    def __init__(self, model: dict[str, Any], prompt: str, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_output_cache_dir() / "answers"
        self.key = json_digest({"model": model, "prompt": prompt})
        self.path = self.root / f"{self.key}.json"
        self.meta = {"model": model, "prompt": prompt}
        self.answers: dict[str, dict[str, str]] = {}
        self.hits = 0
        self._pending = 0
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            # the file's own record must name this model and prompt: a file that does not is not this pair's
            same = isinstance(data, dict) and data.get("model") == model and data.get("prompt") == prompt
            if same and isinstance(data.get("answers"), dict):
                self.answers = data["answers"]
        except (OSError, ValueError):
            pass  # no entry yet, or a damaged one: asked again

    def get(self, stimulus: str, digest: str) -> str | None:
        """The stored answer for this stimulus with these bytes, or ``None``."""
        stored = self.answers.get(stimulus)
        if isinstance(stored, dict) and stored.get("sha256") == digest and isinstance(stored.get("answer"), str):
            self.hits += 1
            return stored["answer"]
        return None

    def put(self, stimulus: str, digest: str, answer: str) -> None:
        self.answers[stimulus] = {"sha256": digest, "answer": answer}
        self._pending += 1
        if self._pending >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the answers whole (atomically); a write that fails leaves the cache as it was."""
        if not self._pending:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            write_text(self.path, json.dumps({**self.meta, "answers": self.answers}, sort_keys=True) + "\n")
        except (OSError, ModelvalError):
            return
        self._pending = 0
