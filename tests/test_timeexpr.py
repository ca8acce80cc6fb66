"""Time expressions in a query, resolved against a given now (sqlite_rrf.core.timeexpr)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sqlite_rrf.core.timeexpr import DAY_MS, resolve


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=timezone.utc).timestamp() * 1000)


# Tuesday 2023-05-30 10:00 UTC
NOW = ms(2023, 5, 30, 10, 0)


@pytest.mark.parametrize(
    "query, start, end",
    [
        ("what did I eat yesterday?", ms(2023, 5, 29), ms(2023, 5, 30)),
        ("what did I do today", ms(2023, 5, 30), NOW + 1),
        ("which book did I finish last week", ms(2023, 5, 23), ms(2023, 5, 30)),
        ("what did I buy last month?", ms(2023, 4, 1), ms(2023, 5, 1)),
        ("What did I do in May?", ms(2023, 5, 1), ms(2023, 6, 1)),
        ("the concert in June", ms(2022, 6, 1), ms(2022, 7, 1)),  # the latest June not after now
        ("the trip in June 2023", ms(2023, 6, 1), ms(2023, 7, 1)),
        ("my dentist on March 5th", ms(2023, 3, 5), ms(2023, 3, 6)),
        ("my dentist on 5 March", ms(2023, 3, 5), ms(2023, 3, 6)),
        ("who came last Saturday", ms(2023, 5, 27), ms(2023, 5, 28)),
        ("who came on Tuesday", ms(2023, 5, 23), ms(2023, 5, 24)),  # not today: the one before
        ("what did I fix last weekend", ms(2023, 5, 27), ms(2023, 5, 29)),
        ("how many runs in the past two weeks", NOW - 14 * DAY_MS, NOW + 1),
        ("last year's taxes", ms(2022, 1, 1), ms(2023, 1, 1)),
        ("this month", ms(2023, 5, 1), NOW + 1),
    ],
)
def test_windows(query, start, end):
    w = resolve(query, NOW)
    assert w is not None and (w.start, w.end) == (start, end), w


@pytest.mark.parametrize(
    "query, days, tol",
    [
        ("a museum I visited two months ago", 2 * 30.44, 15.22),
        ("the book I finished a week ago", 7, 3),
        ("something I cooked a couple of days ago", 2, 1),
        ("what did I buy 3 weeks ago", 21, 5.25),
    ],
)
def test_ago_is_a_window_around_that_time(query, days, tol):
    w = resolve(query, NOW)
    centre = NOW - days * DAY_MS
    assert w.start == pytest.approx(centre - tol * DAY_MS, abs=2)
    assert w.end == pytest.approx(min(NOW, centre + tol * DAY_MS) + 1, abs=2)


@pytest.mark.parametrize(
    "query",
    [
        "How many days ago did I attend a networking event?",
        "How many weeks ago did I meet my aunt?",
        "order of airlines I flew with before today",
        "what is my cat called",
        "I may go there",
        "",
    ],
)
def test_no_time_named(query):
    assert resolve(query, NOW) is None


def test_deterministic_and_now_is_a_parameter():
    a = resolve("what did I do yesterday", NOW)
    assert a == resolve("what did I do yesterday", NOW)
    b = resolve("what did I do yesterday", NOW + 7 * DAY_MS)
    assert b.start == a.start + 7 * DAY_MS
    with pytest.raises(TypeError, match="now must be an int"):
        resolve("yesterday", 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="query must be str"):
        resolve(None, NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, start, end",
    [
        ("yesterday", ms(2023, 5, 29), ms(2023, 5, 30)),
        ("  Last  week ", ms(2023, 5, 23), ms(2023, 5, 30)),
        ("today", ms(2023, 5, 30), NOW + 1),
        ("last month", ms(2023, 4, 1), ms(2023, 5, 1)),
        ("in May", ms(2023, 5, 1), ms(2023, 6, 1)),
        ("past 3 days", NOW - 3 * DAY_MS, NOW + 1),
        ("2 days ago", NOW - 2 * DAY_MS, NOW - 2 * DAY_MS),  # a moment, not a window
        ("a week ago", NOW - 7 * DAY_MS, NOW - 7 * DAY_MS),
        ("now", NOW, NOW),
    ],
)
def test_time_bound_reads_a_whole_option(text, start, end):
    """An option's value (``--since yesterday``): the window's start, or its end."""
    from sqlite_rrf.core.timeexpr import time_bound

    assert time_bound(text, NOW) == start
    assert time_bound(text, NOW, end=True) == end


@pytest.mark.parametrize(
    "text", ["", "2023-05-01", "what did I do yesterday", "yesterday morning", "2 days", "may"]
)
def test_time_bound_is_none_unless_the_whole_text_is_one_expression(text):
    from sqlite_rrf.core.timeexpr import time_bound

    assert time_bound(text, NOW) is None
