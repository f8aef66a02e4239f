"""The answer cache: a vision-language model's text answers, keyed by model, prompt and stimulus.

A VLM answers slowly and in text: one JSON file per (model, prompt) pair, ``<cache folder>/answers/<key>.json``,
by the rules every cache keeps (:mod:`modelval.records.store`). It maps each stimulus (its relative path and the
SHA-256 of its bytes) to the answer, so a stimulus whose bytes change is asked again; a file is served only when
its record names this model and prompt. It is rewritten whole every :data:`FLUSH_EVERY` answers and at the end.
The model's identity is the caller's (for a ``file.py:fn`` VLM: the spec and the file's SHA-256).
"""

from __future__ import annotations

import json
import os
from typing import Any

from modelval.errors import ModelvalError
from modelval.records.store import Store, key_of, read_record

#: Answers written to disk at least this often during a run (an interrupted run loses fewer).
FLUSH_EVERY = 16


class AnswerStore(Store):
    """The answer files: ``<key>.json``, one per (model, prompt) pair."""

    folder = "answers"
    what = "VLM answer file"


class AnswerCache:
    """Answers of one (model, prompt) pair: ``get(stimulus, digest)``, ``put(...)``, ``flush()``.

    Parameters
    ----------
    model
        The model's identity (JSON-ready).
    prompt
        The prompt's text.
    root
        The store's folder (default: ``<cache folder>/answers``).
    """

    def __init__(self, model: dict[str, Any], prompt: str, root: str | os.PathLike[str] | None = None) -> None:
        self.store = AnswerStore(root)
        self.key = key_of({"model": model, "prompt": prompt})
        self.path = self.store.root / f"{self.key}.json"
        self.meta = {"key": self.key, "model": model, "prompt": prompt}
        self.answers: dict[str, dict[str, str]] = {}
        self.hits = 0
        self._pending = 0
        try:
            record = read_record(self.path, self.key)
        except (OSError, ValueError):
            return  # no entry yet, or a damaged or foreign one: asked again
        # the record must name this model and prompt: a file that does not is not this pair's
        if record.get("model") == model and record.get("prompt") == prompt and isinstance(record.get("answers"), dict):
            self.answers = record["answers"]
            self.store.touch(self.path)

    def get(self, stimulus: str, digest: str) -> str | None:
        """The stored answer for this stimulus with these bytes, or ``None``.

        Parameters
        ----------
        stimulus
            The stimulus's relative path.
        digest
            The SHA-256 of its bytes.
        """
        stored = self.answers.get(stimulus)
        if isinstance(stored, dict) and stored.get("sha256") == digest and isinstance(stored.get("answer"), str):
            self.hits += 1
            return stored["answer"]
        return None

    def put(self, stimulus: str, digest: str, answer: str) -> None:
        """Keep an answer (written with the next :meth:`flush`, at the latest after :data:`FLUSH_EVERY`).

        Parameters
        ----------
        stimulus
            The stimulus's relative path.
        digest
            The SHA-256 of its bytes.
        answer
            The model's text.
        """
        self.answers[stimulus] = {"sha256": digest, "answer": answer}
        self._pending += 1
        if self._pending >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the answers whole; a write that fails leaves the cache as it was."""
        if not self._pending:
            return
        text = json.dumps({**self.meta, "answers": self.answers}, sort_keys=True) + "\n"
        try:
            self.store.write(self.path, lambda handle: handle.write(text.encode()))
        except (OSError, ModelvalError):
            return
        self._pending = 0
        self.store.evict()
