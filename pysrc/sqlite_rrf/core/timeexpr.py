"""Time expressions in a query ("yesterday", "last week", "in May", "two months ago"),
resolved against a given ``now`` into a window of time.

:func:`resolve` reads an English query and returns the :class:`TimeWindow` in which the
thing asked about most likely happened (and so was most likely written down), or None
when the query names no time. It is deterministic: plain regular expressions, calendar
arithmetic in UTC, and ``now`` (milliseconds since the epoch) is always a parameter —
never the clock. The recall uses the window as a closeness signal (episodes created in
it rank higher; docs/recall.md), never as a filter, so a wrong reading costs a little
ranking, never a memory.

What is understood (case-insensitive; numbers as digits or words up to twenty, "a",
"an", "a couple of" = 2, "a few" = 3, "several" = 4):

======================================  ===============================================
expression                              window
======================================  ===============================================
today, this morning, tonight            today (00:00 UTC) to now
yesterday, last night                   yesterday
N days / weeks / months / years ago     centred N units before now, ± a quarter of
                                        the span (at least ± 1 day, ± 3 days for
                                        weeks, ± 10 days for months, ± 2 months for
                                        years)
last / past / previous week             the 7 days before today
this week                               Monday of this week to now
last month, last year                   the previous calendar month / year
this month, this year                   its first day to now
past / last N days / weeks / months     N units before now to now
last / past / this weekend              the most recent Saturday and Sunday before today
last <weekday>, on <weekday>            the most recent such day before today
in / during <month> [year]              that month (the most recent one not after now
                                        when no year is given)
<month> <day>, <day> of <month>         that day (likewise)
======================================  ===============================================

"How many days ago …" names no time (it asks for one) and is not read.

:func:`time_bound` reads a whole option's value (``--since yesterday``) as one of these
expressions, or ``now``: the start of its window for a lower bound, the end for an upper
one, so ``--since yesterday --until yesterday`` is yesterday; "N days / weeks / months /
years ago" is the moment that long before now (a month is 30.44 days, a year 365.25).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import List, Optional, Tuple

__all__ = ["DAY_MS", "TimeWindow", "resolve", "time_bound"]

DAY_MS = 86_400_000

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 4,
}
_NUM = (
    r"(\d{1,3}|a couple of|a couple|couple of|a few|few|several|an|a|one|two|three|four|"
    r"five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty)"
)
_UNIT = r"(day|week|month|year)s?"
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MON_RE = (
    r"(january|february|march|april|may|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
)
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_WD_RE = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"


@dataclass(frozen=True)
class TimeWindow:
    """A window of time, ``start`` inclusive to ``end`` exclusive (ms since the epoch,
    UTC), and the words of the query it was read from."""

    start: int
    end: int
    text: str


def _num(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _month(word: str) -> int:
    for i, m in enumerate(_MONTHS):
        if m.startswith(word[:3]):
            return i + 1
    raise ValueError(word)  # pragma: no cover - the regex admits month names only


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _month_start(y: int, m: int) -> datetime:
    while m < 1:
        y, m = y - 1, m + 12
    while m > 12:
        y, m = y + 1, m - 12
    return datetime(y, m, 1, tzinfo=timezone.utc)


_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_MIN_TOL_DAYS = {"day": 1.0, "week": 3.0, "month": 10.0, "year": 60.0}


def _ago(n: int, unit: str, now: int, text: str) -> TimeWindow:
    span = n * _UNIT_DAYS[unit]
    tol = max(_MIN_TOL_DAYS[unit], span / 4)
    centre = now - span * DAY_MS
    return TimeWindow(int(centre - tol * DAY_MS), int(min(now, centre + tol * DAY_MS)) + 1, text)


def _candidates(q: str, now: int) -> List[Tuple[int, TimeWindow]]:
    """(position in the query, window) for every expression found."""
    nowdt = datetime.fromtimestamp(now / 1000, tz=timezone.utc)
    today = nowdt.replace(hour=0, minute=0, second=0, microsecond=0)
    t0 = _ms(today)
    out: List[Tuple[int, TimeWindow]] = []

    def add(m: "re.Match[str]", start: int, end: int) -> None:
        out.append((m.start(), TimeWindow(int(start), int(end), m.group(0).strip())))

    for m in re.finditer(
        r"\b(today|this morning|this afternoon|this evening|tonight|"
        r"earlier today)\b",
        q,
    ):
        if re.search(r"\b(before|until|till|up to)\s+$", q[: m.start()]):
            continue  # "before today": all of the past
        add(m, t0, now + 1)
    for m in re.finditer(r"\b(yesterday|last night)\b", q):
        add(m, t0 - DAY_MS, t0)
    for m in re.finditer(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", q):
        if re.search(r"how\s+(many|much)\s+$", q[: m.start()]):
            continue  # "how many days ago" asks for a time
        w = _ago(_num(m.group(1)), m.group(2), now, m.group(0))
        out.append((m.start(), w))
    for m in re.finditer(rf"\b(?:in\s+)?(?:the\s+)?(?:past|last|previous)\s+{_NUM}\s+{_UNIT}\b", q):
        n = _num(m.group(1))
        add(m, now - int(n * _UNIT_DAYS[m.group(2)] * DAY_MS), now + 1)
    for m in re.finditer(r"\b(?:last|past|previous)\s+week\b", q):
        add(m, t0 - 7 * DAY_MS, t0)
    for m in re.finditer(r"\bthis\s+week\b", q):
        add(m, t0 - today.weekday() * DAY_MS, now + 1)
    for m in re.finditer(r"\b(?:last|previous)\s+month\b", q):
        add(
            m,
            _ms(_month_start(today.year, today.month - 1)),
            _ms(_month_start(today.year, today.month)),
        )
    for m in re.finditer(r"\bpast\s+month\b", q):
        add(m, now - 30 * DAY_MS, now + 1)
    for m in re.finditer(r"\bthis\s+month\b", q):
        add(m, _ms(_month_start(today.year, today.month)), now + 1)
    for m in re.finditer(r"\b(?:last|previous)\s+year\b", q):
        add(
            m,
            _ms(datetime(today.year - 1, 1, 1, tzinfo=timezone.utc)),
            _ms(datetime(today.year, 1, 1, tzinfo=timezone.utc)),
        )
    for m in re.finditer(r"\bpast\s+year\b", q):
        add(m, now - 365 * DAY_MS, now + 1)
    for m in re.finditer(r"\bthis\s+year\b", q):
        add(m, _ms(datetime(today.year, 1, 1, tzinfo=timezone.utc)), now + 1)
    for m in re.finditer(r"\b(?:last|past|previous|this)\s+weekend\b", q):
        back = (today.weekday() - 5) % 7 or 7  # days back to the latest Saturday before today
        sat = t0 - back * DAY_MS
        add(m, sat, sat + 2 * DAY_MS)
    for m in re.finditer(rf"\b(?:last|on|this past|past)\s+{_WD_RE}\b", q):
        wd = _WEEKDAYS.index(m.group(1))
        back = (today.weekday() - wd) % 7 or 7
        d = t0 - back * DAY_MS
        add(m, d, d + DAY_MS)
    for m in re.finditer(rf"\b{_MON_RE}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}}))?", q):
        day_m = _day_window(_month(m.group(1)), int(m.group(2)), m.group(3), today)
        if day_m is not None:
            add(m, day_m[0], day_m[1])
    for m in re.finditer(
        rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?"
        rf"{_MON_RE}\b(?:,?\s+(\d{{4}}))?",
        q,
    ):
        day_m = _day_window(_month(m.group(2)), int(m.group(1)), m.group(3), today)
        if day_m is not None:
            add(m, day_m[0], day_m[1])
    for m in re.finditer(
        rf"\b(?:in|during|of|since|last)\s+(?:early\s+|late\s+|mid-?)?"
        rf"{_MON_RE}\b(?:,?\s+(\d{{4}}))?",
        q,
    ):
        mon = _month(m.group(1))
        if m.group(1) == "may" and not m.group(0).startswith(("in", "during", "last")):
            continue  # "of may" / "since may" is too often the verb
        if m.group(2):
            y = int(m.group(2))
        else:
            y = today.year if mon <= today.month else today.year - 1
            if m.group(0).startswith("last") and mon == today.month:
                y -= 1
        add(m, _ms(_month_start(y, mon)), _ms(_month_start(y, mon + 1)))
    return out


def _day_window(
    mon: int, day: int, year: Optional[str], today: datetime
) -> Optional[Tuple[int, int]]:
    y = int(year) if year else today.year
    try:
        d = datetime(y, mon, day, tzinfo=timezone.utc)
    except ValueError:
        return None
    if not year and d > today:
        try:
            d = datetime(y - 1, mon, day, tzinfo=timezone.utc)
        except ValueError:
            return None
    return _ms(d), _ms(d + timedelta(days=1))


def resolve(query: str, now: int) -> Optional[TimeWindow]:
    """The window of the first time expression of ``query`` (see the module docstring),
    resolved against ``now`` (ms since the epoch, UTC); None when it names no time.

    Raises:
        TypeError: ``query`` is not a str or ``now`` not an int.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be str, not {type(query).__name__}")
    if isinstance(now, bool) or not isinstance(now, int):
        raise TypeError(f"now must be an int (ms since the epoch), not {type(now).__name__}")
    q = " ".join(query.lower().split())
    found = _candidates(q, now)
    if not found:
        return None
    # the first expression; at one position, the longest (most specific) reading
    found.sort(key=lambda pw: (pw[0], -len(pw[1].text)))
    return found[0][1]


def time_bound(text: str, now: int, *, end: bool = False) -> Optional[int]:
    """``text``, the whole of it one time expression of the table above (or ``now``), as
    a bound in ms since the epoch: its window's start, or with ``end`` its window's end
    (exclusive); "N units ago" is the moment ``now`` minus N units. None when ``text``
    is not one expression ("meeting yesterday", "2026-11-01", "")."""
    if isinstance(now, bool) or not isinstance(now, int):
        raise TypeError(f"now must be an int (ms since the epoch), not {type(now).__name__}")
    q = " ".join(str(text).lower().split())
    if q == "now":
        return now
    m = re.fullmatch(rf"{_NUM}\s+{_UNIT}\s+ago", q)
    if m:
        return int(now - _num(m.group(1)) * _UNIT_DAYS[m.group(2)] * DAY_MS)
    whole = [w for pos, w in _candidates(q, now) if pos == 0 and w.text == q]
    if not whole:
        return None
    return whole[0].end if end else whole[0].start
