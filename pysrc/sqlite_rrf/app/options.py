"""The options' values as every way in reads them: times (:func:`parse_time`) and
numbers written in ASCII (:func:`ascii_float`, :func:`int_arg`, :func:`float_arg`)."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

from .errors import UserError

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_time(text: Optional[str], option: str) -> Optional[int]:
    """A time option's value in ms since the epoch: milliseconds since the epoch, or an
    ISO 8601 date/time (UTC when it names no zone); None for None. A bad value is a
    :class:`UserError` naming ``option``."""
    if text is None:
        return None
    text = text.strip()
    if _INT.fullmatch(text):  # ASCII digits only: '²'.isdigit() is true
        v = int(text)
        if abs(v) > 2**62:
            raise UserError(f"{option}: {text} is out of range")
        return v
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"{option}: expected milliseconds since the epoch or an ISO date such "
            f"as 2026-11-24 or 2026-11-24T09:30, got {text!r}"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def ascii_float(text: str) -> float:
    """A number written in ASCII (``0.5``, ``-1``, ``2e-3``); ValueError otherwise (Python's
    float() also takes other scripts' digits, ``_`` separators, ``nan`` and ``inf``)."""
    if not _FLOAT.fullmatch(text.strip()):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def int_arg(text: str) -> int:
    """argparse ``type=`` of an integer option: ASCII digits, an optional minus sign.
    argparse's error names the option (``argument --limit: expected an integer ...``)."""
    if not _INT.fullmatch(text.strip()):
        import argparse

        raise argparse.ArgumentTypeError(f"expected an integer (digits 0-9), got {text!r}")
    return int(text)


def float_arg(text: str) -> float:
    """argparse ``type=`` of a number option: ASCII digits, a point, an exponent."""
    try:
        return ascii_float(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(
            f"expected a number such as 0.5 or 60, got {text!r}"
        ) from None
