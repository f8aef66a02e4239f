"""The nightly's page of a 1,300-model run store (issue 41: at most 10 s on one CPU core, and a usable page).

A synthetic store, written straight into SQLite as ``modelval validate`` would: ``--models`` models over
``--nights`` nights, every record with its per-image decisions on the 1,280 stimuli; each night about 4% of the
models fail (new failures), 1% are known failures, 1% are fixed, 0.5% run out of memory and 0.5% never run.
Then ``nightly_report`` is timed on one core (the process is pinned), and the page's size is printed.

    python benchmarks/bench_report.py [--models 1300] [--nights 7]

The last line is ``report_seconds=<s> page_kib=<k>``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from _common import DATA_ROOT, print_table


def _stimuli() -> list[tuple[str, str]]:
    return sorted((p.parent.name, p.name) for p in Path(DATA_ROOT).glob("*/*.png"))


def _rows(models: int, nights: int, rng: random.Random) -> tuple[list[tuple], str]:
    stimuli = _stimuli()
    rows, status = [], []
    for m in range(models):
        model = f"zoo_model_{m:04d}"
        fate = rng.random()
        expected = "known-failure" if fate < 0.02 else "pass"
        status.append(f'[models.{model}]\n"model/cuda/fp32" = '
                      + ('{ status = "known-failure", reason = "issue 7" }' if expected != "pass" else '"pass"'))
        for night in range(nights):
            last = night == nights - 1
            if last and fate > 0.995:
                continue  # never run
            passed = not (last and fate < 0.04) and not (fate < 0.02 and not (last and fate < 0.01))
            error = "CUDA out of memory (batch 256)" if last and 0.99 < fate <= 0.995 else None
            bias = rng.uniform(0.15, 0.3) if passed else rng.uniform(0.05, 0.12)
            summary = {"label": model, "shape_bias": None if error else bias, "ci95": [bias - 0.03, bias + 0.03],
                       "cue_accuracy": 0.7, "conflict_images": 1200, "expected": 0.22, "tolerance": 0.05,
                       "expected_source": "the zoo's table", "difference": bias - 0.22, "passed": passed and not error,
                       "status": "error" if error else "pass" if passed else "fail", "reason": "",
                       "verdict": "PASS" if passed else "FAIL", "error": error}  # fmt: skip
            provenance = {"created": f"2026-11-{night + 1:02d}T02:{m // 60 % 60:02d}:{m % 60:02d}+00:00",
                          "session": f"night-{night}", "device": {"type": "cuda"}, "precision": "fp32",
                          "command": f"modelval validate --models-file zoo.toml  # {model}", "modelval": "0.1.0",
                          "packages": {"torch": "2.6.0", "torchvision": "0.21.0"},
                          "git": {"commit": "abc"}}  # fmt: skip
            decisions = None if error else {
                name: [shape, shape if (passed or rng.random() < 0.7) else "knife"] for shape, name in stimuli
            }  # fmt: skip
            rows.append((provenance["created"], "validate", model, "cue-conflict", "model (half)", json.dumps(summary),
                         None if decisions is None else json.dumps(decisions), json.dumps(provenance)))  # fmt: skip
    rows.sort(key=lambda row: row[0])
    return rows, "\n".join(status) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1300)
    parser.add_argument("--nights", type=int, default=7)
    args = parser.parse_args()

    from modelval.api.report import nightly_report
    from modelval.records.run_store import RunStore

    with tempfile.TemporaryDirectory() as folder:
        store = RunStore(Path(folder) / "runs.sqlite")
        store.runs(limit=1)  # creates the table
        rows, status_text = _rows(args.models, args.nights, random.Random(0))
        with sqlite3.connect(store.path) as connection:
            connection.executemany(
                "INSERT INTO runs (created, command, model, dataset, label, summary, decisions, provenance) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows,
            )  # fmt: skip
        status = Path(folder) / "status.toml"
        status.write_text(status_text)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
        start = time.perf_counter()
        report = nightly_report(Path(folder) / "page", status, run_store=store, window_hours=24, stimuli=DATA_ROOT)
        seconds = time.perf_counter() - start
        page = (report.folder / "index.html").stat().st_size / 1024
        folder_kib = sum(p.stat().st_size for p in report.files) / 1024
        coverage = report.data["coverage"]
        print_table(["records", "cells", "scored", "failed", "never run", "seconds (1 core)", "page KiB", "folder KiB"],
                    [[len(rows), coverage["cells"], coverage["scored"], coverage["failed"], coverage["never run"],
                      f"{seconds:.2f}", f"{page:.0f}", f"{folder_kib:.0f}"]])  # fmt: skip
        print(f"report_seconds={seconds:.2f} page_kib={page:.0f}")


if __name__ == "__main__":
    main()
