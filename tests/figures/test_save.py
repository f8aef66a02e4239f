"""``modelval.figures.save``: exactly the named file (and its PDF sibling when asked), written whole or not at
all, the figure closed, an unknown format refused in one line."""

from __future__ import annotations

import errno
import os

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure
from PIL import Image

from modelval.errors import DataError
from modelval.figures import save

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def fig():
    figure, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    yield figure
    plt.close(figure)


def test_writes_exactly_the_named_file_and_closes_the_figure(tmp_path, fig):
    assert save(fig, tmp_path / "plot.png") == [tmp_path / "plot.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]  # no PDF, no temporary file
    assert (tmp_path / "plot.png").read_bytes()[:8] == PNG_MAGIC
    assert not plt.fignum_exists(fig.number)


def test_pdf_adds_the_pdf_sibling(tmp_path, fig):
    assert save(fig, tmp_path / "plot.png", pdf=True) == [tmp_path / "plot.png", tmp_path / "plot.pdf"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png"]
    assert (tmp_path / "plot.pdf").read_bytes()[:5] == b"%PDF-"
    assert not plt.fignum_exists(fig.number)


@pytest.mark.parametrize(
    ("name", "pdf", "written", "magic"),
    [
        ("plot.svg", False, ["plot.svg"], b"<?xml"),
        ("plot.PDF", False, ["plot.PDF"], b"%PDF-"),
        ("plot.pdf", True, ["plot.pdf"], b"%PDF-"),  # a PDF already: nothing more
        ("plot", False, ["plot"], PNG_MAGIC),  # no suffix: PNG, under exactly that name
        ("plot", True, ["plot", "plot.pdf"], PNG_MAGIC),
    ],
)
def test_the_suffix_picks_the_format(tmp_path, fig, name, pdf, written, magic):
    paths = save(fig, tmp_path / name, pdf=pdf)
    assert [p.name for p in paths] == written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(written)
    assert paths[0].read_bytes()[: len(magic)] == magic


def test_an_unknown_suffix_is_one_line_and_writes_nothing(tmp_path, fig):
    with pytest.raises(DataError) as error:
        save(fig, tmp_path / "plot.docx", pdf=True)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"cannot write {tmp_path / 'plot.docx'}: ")
    assert ".docx is not one (use .png, .pdf or .svg)" in message
    assert list(tmp_path.iterdir()) == []
    assert not plt.fignum_exists(fig.number)  # closed also when refused


def test_a_failed_write_leaves_the_previous_file_and_no_temporary_file(tmp_path, fig, monkeypatch):
    target = tmp_path / "plot.png"
    target.write_bytes(b"last week's figure")
    real = Figure.savefig

    def full_disk(self, handle, **options):
        real(self, handle, **options)  # the bytes went into the temporary file, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", full_disk)
    with pytest.raises(DataError, match=f"^cannot write {target}: No space left on device$"):
        save(fig, target, pdf=True)
    assert target.read_bytes() == b"last week's figure"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]  # no temporary file, no PDF
    assert not plt.fignum_exists(fig.number)


def test_dpi_and_bbox_pass_through(tmp_path):
    def drawn() -> Figure:
        figure, ax = plt.subplots(figsize=(4, 2))
        ax.plot([0, 1])
        figure.text(0.0, -0.4, "a footnote below the figure")  # what add_sources does
        return figure

    [whole] = save(drawn(), tmp_path / "whole.png", dpi=50)
    with Image.open(whole) as image:
        assert image.size == (200, 100)  # 4 x 2 inches at 50 dpi; the footnote is cut off
    [tight] = save(drawn(), tmp_path / "tight.png", dpi=50, bbox_inches="tight")
    with Image.open(tight) as image:
        assert image.size[1] > 100  # the page grows to keep the footnote
