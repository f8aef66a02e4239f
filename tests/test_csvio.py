"""Every CSV modelval writes shows a user's label as text, never as a spreadsheet formula (OWASP CSV injection)."""

from __future__ import annotations

import csv
import io

import pytest

from modelval.behaviour.experiments import experiment
from modelval.cli import main
from modelval.csvio import FORMULA_STARTS, csv_writer, spreadsheet_safe

EVIL = '=HYPERLINK("http://127.0.0.1/x","click")'


@pytest.mark.parametrize("start", FORMULA_STARTS)
def test_every_formula_start_is_written_as_text(start):
    buffer = io.StringIO()
    csv_writer(buffer).writerow([f"{start}cmd|' /C calc'!A0", "resnet50", 0.5, None])
    cell = next(csv.reader(io.StringIO(buffer.getvalue())))[0]
    assert cell == f"'{start}cmd|' /C calc'!A0"


@pytest.mark.parametrize("number", ["-0.25", "-inf", "+1e-3", "-3"])
def test_signed_numbers_stay_numbers(number):
    assert spreadsheet_safe(number) == number
    assert spreadsheet_safe(float(number)) == float(number)


def _no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS) or _is_number(cell), (cell, row)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_a_decision_files_subject_never_reaches_the_benchmark_csv_as_a_formula(
    model_vs_human_raw_data, modelval_reference_dir, tmp_path, capsys
):
    upstream = experiment("rotation").upstream
    source = model_vs_human_raw_data / upstream / f"{upstream}_subject-01_session_1.csv"
    rows = list(csv.DictReader(source.open(newline="")))
    hostile = tmp_path / f"{upstream}_evil_session_1.csv"
    with hostile.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "subj": EVIL} for row in rows)

    assert main(["benchmark", "--decisions", str(hostile), "--csv"]) == 0
    printed = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert printed[1][0] == "'" + EVIL  # the label is kept, shown as text
    _no_formula(printed)

    report = tmp_path / "report"
    assert main(["benchmark", "--decisions", str(hostile), "--report-dir", str(report)]) == 0
    capsys.readouterr()
    written = list(csv.reader((report / "benchmark.csv").open(newline="")))
    assert any(row[0] == "'" + EVIL for row in written[1:])
    _no_formula(written)
