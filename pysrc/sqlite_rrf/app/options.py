"""The options' values as every way in reads them: times (:func:`parse_time`,
:func:`check_time_range`) and numbers written in ASCII (:func:`ascii_float`,
:func:`int_arg`, :func:`float_arg`). What a recall is told is one value,
:class:`sqlite_rrf.core.options.RecallOptions`, which each front-end makes from these."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

from .errors import UserError

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


#: What a time option takes, said in its error.
TIME_FORMS = (
    "milliseconds since the epoch or an ISO date such as 2026-11-24 or 2026-11-24T09:30 "
    "(UTC unless it names a zone), or a time such as 'yesterday', '2 days ago' or "
    "'last week'"
)


def _is_upper(option: str) -> bool:
    """Whether ``option`` names an upper bound (``--until``, ``until``)."""
    return option.lstrip("-").lower() in ("until", "before")


def parse_time(
    text: Optional[str], option: str, *, now: Optional[int] = None, end: Optional[bool] = None
) -> Optional[int]:
    """A time option's value in ms since the epoch: milliseconds since the epoch, an ISO
    8601 date/time (UTC when it names no zone), or a time expression such as
    ``yesterday``, ``2 days ago``, ``last week`` (:func:`sqlite_rrf.core.timeexpr.time_bound`,
    against ``now``, default the clock): the start of the time it names, or its end
    when ``end`` (default: when ``option`` is ``--until``), so ``--since yesterday
    --until yesterday`` is yesterday. None for None. A bad value is a :class:`UserError`
    naming ``option``."""
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
        t = None
    if t is not None:
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        return int(t.timestamp() * 1000)
    if text.isascii():
        import time

        from ..core.timeexpr import time_bound

        upper = _is_upper(option) if end is None else end
        ms = time_bound(text, int(time.time() * 1000) if now is None else now, end=upper)
        if ms is not None:
            return ms
    raise UserError(f"{option}: expected {TIME_FORMS}, got {text!r}")


def check_time_range(
    since: Optional[str],
    until: Optional[str],
    since_option: str = "--since",
    until_option: str = "--until",
    now: Optional[int] = None,
) -> Tuple[Optional[int], Optional[int]]:
    """``since`` and ``until`` read by :func:`parse_time` (against one ``now``), as ms; a
    ``since`` not before ``until`` is a :class:`UserError` naming both (no episode can
    be created at or after one and before the other: the answer would be empty)."""
    import time

    now = int(time.time() * 1000) if now is None else now
    lo = parse_time(since, since_option, now=now, end=False)
    hi = parse_time(until, until_option, now=now, end=True)
    if lo is not None and hi is not None and lo >= hi:
        from .display import iso_time

        raise UserError(
            f"{since_option} {since!r} ({iso_time(lo)}) is not before {until_option} "
            f"{until!r} ({iso_time(hi)}): nothing can match; {since_option} is the "
            f"earliest time, {until_option} the latest"
        )
    return lo, hi


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
