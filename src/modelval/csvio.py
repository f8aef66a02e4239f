"""CSV cells a spreadsheet shows as text: every CSV modelval writes goes through :func:`csv_writer`.

Labels reach our CSV files from users' files (a decision file's ``subj`` column, a models file's ids, a prediction
file's event names). A cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by
Excel, LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` in the first cell of every row of a
benchmark table). As OWASP recommends (CSV injection), such a text cell is written with a leading ``'``, which
the spreadsheet shows as text. A cell that is a number (``-0.25``, ``-inf``, ``+1e-3``) is a number, not a
formula, and stays as it is, so that tables of signed differences read back as numbers.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from typing import IO, Any

#: The first characters a spreadsheet reads as the start of a formula (OWASP).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """``value``, with a ``'`` before it when it is text a spreadsheet would run as a formula.

    Parameters
    ----------
    value
        A cell: text is checked, anything else (numbers, ``None``) is returned unchanged.

    Examples
    --------
    >>> spreadsheet_safe('=HYPERLINK("http://x", "click")')
    '\\'=HYPERLINK("http://x", "click")'
    >>> spreadsheet_safe("-0.25"), spreadsheet_safe("resnet50"), spreadsheet_safe(-1)
    ('-0.25', 'resnet50', -1)
    """
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)  # "-0.25", "-inf", "+1e-3": a number, never run as a formula
    except ValueError:
        return "'" + value
    return value


class _SafeWriter:
    """A ``csv.writer`` whose rows pass through :func:`spreadsheet_safe`."""

    def __init__(self, handle: IO[str], **options: Any) -> None:
        self._writer = csv.writer(handle, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow([spreadsheet_safe(cell) for cell in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(handle: IO[str], **options: Any) -> _SafeWriter:
    """A ``csv.writer`` over ``handle`` that writes every text cell spreadsheet-safe (the module docstring).

    Parameters
    ----------
    handle
        The open text file (opened with ``newline=""``) or buffer.
    **options
        ``csv.writer``'s options (``lineterminator``, ...).
    """
    return _SafeWriter(handle, **options)


def csv_dict_rows(columns: Iterable[str], rows: Iterable[Mapping[str, Any]], restval: Any = "") -> list[list[Any]]:
    """Rows as lists in ``columns`` order (missing keys: ``restval``), for :func:`csv_writer`.

    Parameters
    ----------
    columns
        The header.
    rows
        Mappings from column to value; keys not in ``columns`` are left out.
    restval
        The value of a column a row lacks.
    """
    names = list(columns)
    return [[row.get(name, restval) for name in names] for row in rows]
