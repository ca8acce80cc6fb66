"""docs/profiles.md's table of the profiles, written from the one table of them,
``sqlite_rrf.core.profiles.TABLE``.

docs/profiles.md holds a `cog <https://pypi.org/project/cogapp/>`_ block::

    <!-- [[[cog import profile_docs; profile_docs.table() ]]] -->

and cog writes the table below it, up to ``<!-- [[[end]]] -->``. ``make profile-docs``
regenerates it (``cog -r -I tools docs/profiles.md``, and the list of the profiles in
``sql/recall/header.sql``: ``python -m sqlite_rrf.core.statements --write``); ``make lint``
fails when either is stale. A profile's words are changed in the table, never here.
"""

from __future__ import annotations

from sqlite_rrf.core.profiles import TABLE
from sqlite_rrf.core.statements import recall_defaults

try:  # inside cog, output goes to the block; outside (tests, a shell), it is printed
    import cog
except ImportError:  # pragma: no cover
    cog = None


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: one line, ``|`` escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def profiles_table() -> str:
    """The Markdown table of the profiles: name (the default marked), what it does, its
    score, its default ``k`` (the statement's, ``recall_defaults(name)``) and its source."""
    default = recall_defaults()["profile"]
    lines = [
        "| profile | what it does | score | default k | source |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in TABLE:
        name = f"`{p.name}`" + (" (default)" if p.name == default else "")
        if p.k_use is None:
            k = "–"
        else:
            k = f"{recall_defaults(p.name)['k']:g}" + (f" ({p.k_use})" if p.k_use else "")
        cells = (name, p.summary, p.score, k, p.source)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- what the cog block of docs/profiles.md calls ----


def table() -> None:
    """Write the table of the profiles into the cog block."""
    text = profiles_table()
    if cog is not None and getattr(cog, "inFile", None):
        cog.out(text)
    else:
        print(text, end="")
