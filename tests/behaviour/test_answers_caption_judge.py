"""caption-judge: a letter that contradicts the name written beside it, and a name with its letter in brackets
(issue 42 point 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelval.behaviour.answers import parse_caption_judge, read_responses


@pytest.mark.parametrize(
    ("letters", "category"),
    [
        ("E. elephant", None),  # E is boat: the judge named two categories
        ("E (elephant)", None),
        ("Truck (P)", "truck"),
        ("truck (P)", "truck"),
        ("Truck (G)", None),  # G is car
        ("P (truck)", "truck"),
        ("L. elephant", "elephant"),  # letter and name agree
        ("E) boat", "boat"),
        ("G. automobile", "car"),  # not one of the 16 names: the letter stands
        ("G. car\nP. truck", None),
    ],
)
def test_a_written_name_counts_beside_its_letter(letters, category):
    assert parse_caption_judge(letters) == category


def test_published_rows_whose_letter_contradicts_the_name_are_no_class(vlm_shapebias_dir):
    captioning = Path(vlm_shapebias_dir) / "vlm" / "captioning"
    for name in ("20240127_143212_instructblip_vicuna_7b.csv", "2024xxxx_yyyyyy_cogvlm_chat.csv"):
        decisions = read_responses(captioning / name, parse="caption-judge")
        contradicting = [d for d in decisions if d.answer == "E. elephant"]
        assert len(contradicting) == 1
        assert contradicting[0].response == "na"  # not boat


def test_the_rule_is_stated_where_caption_judge_is_described():
    import modelval.behaviour.answers as answers

    docs = (Path(__file__).resolve().parents[2] / "docs" / "zero-shot.md").read_text()
    for text in (answers.__doc__ or "", docs):
        assert "E. elephant" in text and "Truck (P)" in text
