"""The one table renderer of shmref's reports (tabulate underneath): GitHub
Markdown for documents and reports, plain columns for terminals."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tabulate import tabulate  # type: ignore[import-untyped]


def cell(value: object) -> str:
    """A value as one Markdown cell: pipes escaped, on one line."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    body = [[cell(v) for v in row] for row in rows]
    return str(tabulate(body, headers=list(headers), tablefmt="github", disable_numparse=True))


def text(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    body = [[str(v) for v in row] for row in rows]
    return str(tabulate(body, headers=list(headers), tablefmt="plain", disable_numparse=True))
