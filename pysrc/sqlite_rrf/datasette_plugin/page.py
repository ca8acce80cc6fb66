"""The recall page: a recall row's cells in words (scores, ISO times, ``explain``), a
memory table's cells (ISO times, ``384-d vector``), and the script that turns
``profile`` and ``pool`` into select boxes and folds the rarely used fields."""

from __future__ import annotations

import html
import json
from typing import Any, Optional

from ..app import explain_in_words, ranks_in_words
from .queries import FORM_ORDER, FORM_VISIBLE, form_error

#: The columns that make a row a recall row (the canned queries' and ``sql/recall.sql``'s).
RECALL_COLUMNS = frozenset(
    {
        "id",
        "content",
        "score",
        "bm25_rank",
        "vec_rank",
        "recency_rank",
        "access_rank",
        "similarity",
        "explain",
    }
)
#: How wide the recall page is at most, in CSS pixels (a 1,400 px window shows it all;
#: tests/test_datasette.py measures it in headless Chromium).
WIDTH_PX = 1400
#: Columns shown to 3 decimals; times shown as ISO dates.
ROUNDED = frozenset({"score", "similarity", "relevance", "bm25_score"})
#: Columns of small numbers (sums of 1/(k + rank)) shown to 3 significant digits.
SMALL = frozenset({"fused_score"})
TIMES = frozenset({"created_at", "accessed_at"})


def explain_text(row: Any) -> str:
    """A recall row's ``explain`` in words, as ``sqlite-rrf recall --explain`` says it:
    each list's rank (the vector's with its cosine), then how the score was made."""

    def get(name: str) -> Any:
        try:
            return row[name]
        except (KeyError, IndexError):
            return None

    ranks = ranks_in_words(
        get("bm25_rank"),
        get("vec_rank"),
        get("recency_rank"),
        get("access_rank"),
        get("similarity"),
    )
    try:
        ex = json.loads(get("explain") or "{}")
    except (TypeError, ValueError):
        return ranks
    if not isinstance(ex, dict):
        return ranks
    how = explain_in_words(ex, get("score"), digits=4)
    return f"{ranks}\n{how}"


def render_recall_cell(row: Any, value: Any, column: str) -> Optional[str]:
    """The HTML of a recall row's cell (rounded scores, ISO times, ``explain`` in words),
    or None to leave it to Datasette."""
    from ..app import iso_time

    if value is None:
        return None
    if column in ROUNDED and isinstance(value, float):
        return f'<span title="{value!r}">{value:.3f}</span>'
    if column in SMALL and isinstance(value, float):  # an RRF sum: 0.0328
        return f'<span title="{value!r}">{value:.3g}</span>'
    if column in TIMES and isinstance(value, int):
        day, _, clock = (iso_time(value) or "").partition("T")
        # the time may wrap under the date: the column is a date's width
        when = html.escape(day) + (f"<wbr>T{html.escape(clock)}" if clock else "")
        return f'<span title="{value} ms">{when}</span>'
    if column == "explain":
        lines = explain_text(row).split("\n")
        return (
            '<div class="rrf-explain">'
            + "<br>".join(html.escape(x) for x in lines)
            + f"</div><details><summary>JSON</summary><code>{html.escape(str(value))}"
            "</code></details>"
        )
    return None


#: A memory database's tables whose ``embedding`` is a vector (little-endian float32)
#: and whose ``created_at`` and ``accessed_at`` are times (ms since the epoch).
MEMORY_TABLES = frozenset({"episodes", "episodes_vectors"})


def render_table_cell(value: Any, column: str, table: str) -> Optional[str]:
    """The HTML of a cell of a memory database's table page (and row page): times as ISO
    8601 UTC (the ms in the title), an embedding as ``384-d vector`` (its size in the
    title), not 1,536 bytes of blob, a content key in hex; None to leave it to
    Datasette."""
    from ..app import iso_time

    if table not in MEMORY_TABLES or value is None:
        return None
    if column in TIMES and isinstance(value, int) and not isinstance(value, bool):
        shown = iso_time(value)
        if shown is None:
            return None
        return f'<span title="{value} ms since the epoch">{html.escape(shown)}</span>'
    if column == "content_key" and isinstance(value, (bytes, bytearray, memoryview)):
        return (
            '<span title="the first 16 bytes of the SHA-256 of the normalised text (one '
            'scope&#39;s duplicates share it)">'
            f"{bytes(value).hex()}</span>"
        )
    if column == "embedding" and isinstance(value, (bytes, bytearray, memoryview)):
        size = len(value)
        if size % 4:
            return None  # not a vector of float32: Datasette's own rendering
        return (
            f'<span title="{size:,} bytes: {size // 4} little-endian float32 values">'
            f"{size // 4}-d vector</span>"
        )
    return None


def is_recall_row(row: Any) -> bool:
    try:
        return RECALL_COLUMNS <= set(row.keys())
    except (AttributeError, TypeError):
        return False


# ---------------------------------------------------------------- the page


def is_recall_page(request: Any) -> bool:
    return is_recall_path(getattr(request, "path", "") or "")


def page_script() -> str:
    """The recall page's script: ``profile`` and ``pool`` become select boxes (the
    current value kept), the fields after the first :data:`FORM_VISIBLE` fold under
    "more options", and a style gives the content column room."""
    from ..core.statements import POOLS, PROFILES, recall_defaults

    d = recall_defaults()
    choices = {
        "profile": [["", f"default ({d['profile']})"]] + [[p, p] for p in PROFILES],
        "pool": [["", f"default ({d['pool']})"]] + [[p, p] for p in POOLS],
    }
    visible = list(FORM_ORDER[:FORM_VISIBLE])
    # The page fits in WIDTH_PX (docs/datasette.md): the text columns wrap within their
    # bounds, and a column name breaks after its underscores (the script below), so a
    # column of ranks is as wide as its numbers, not as "recency_rank".
    css = (
        "table.rows-and-columns{font-size:0.9em}"
        ".rows-and-columns td.col-content{min-width:12em;max-width:22em;"
        "white-space:normal}"
        ".rows-and-columns td.col-explain{min-width:14em;max-width:20em;font-size:0.85em}"
        ".rows-and-columns td.col-explain code{white-space:pre-wrap;"
        "word-break:break-all}"
        ".rows-and-columns th{white-space:normal;font-size:0.85em}"
        ".rows-and-columns th,.rows-and-columns td{padding-left:0.3em;padding-right:0.3em}"
        "form.sql details.rrf-more{margin:0.5em 0}"
        "form.sql label{display:inline-block;min-width:9em}"
        ".rows-and-columns td.col-id{white-space:nowrap}"
    )
    return f"""
(function () {{
  var form = document.querySelector('form.sql');
  if (!form) return;
  var style = document.createElement('style');
  style.textContent = {json.dumps(css)};
  document.head.appendChild(style);
  var choices = {json.dumps(choices)};
  Object.keys(choices).forEach(function (name) {{
    var input = form.querySelector('input[name="' + name + '"]');
    if (!input) return;
    var select = document.createElement('select');
    select.name = name;
    select.id = input.id;
    choices[name].forEach(function (c) {{
      var o = document.createElement('option');
      o.value = c[0];
      o.textContent = c[1];
      if (c[0] === input.value) o.selected = true;
      select.appendChild(o);
    }});
    input.parentNode.replaceChild(select, input);
  }});
  document.querySelectorAll('table.rows-and-columns th').forEach(function (th) {{
    var walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (var n = walker.nextNode(); n; n = walker.nextNode()) {{
      n.nodeValue = n.nodeValue.replace(/_/g, '_\u200b');
    }}
  }});
  var visible = {json.dumps(visible)};
  var more = document.createElement('details');
  more.className = 'rrf-more';
  var summary = document.createElement('summary');
  summary.textContent = 'more options (weights, pool size, k, alpha, qvec, now, ...)';
  more.appendChild(summary);
  var last = null, moved = 0;
  form.querySelectorAll('input[type="text"], select').forEach(function (el) {{
    var p = el.closest('p');
    if (!p || p.parentNode !== form) return;
    if (visible.indexOf(el.name) >= 0) {{ last = p; return; }}
    if (el.value) more.open = true;
    more.appendChild(p);
    moved++;
  }});
  if (moved && last) last.parentNode.insertBefore(more, last.nextSibling);
}})();
"""


def is_recall_path(path: str) -> bool:
    """Whether ``path`` is a recall page's, in any format (``/db/recall``,
    ``/db/recall.json``, ``/db/recall_knn.csv``)."""
    last = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return last in ("recall", "recall_knn")


def page_error(args: Any) -> Optional[str]:
    """The fault of a recall page's fields (``args``: field to text), in the command
    line's words, or None: a bad field (:func:`form_error`), else ``since`` not before
    ``until`` (:func:`sqlite_rrf.app.check_time_range`: the answer would be empty)."""
    from ..app import UserError, check_time_range

    error = form_error(args)
    if error is not None:
        return error
    since, until = ((args.get(k) or "").strip() for k in ("since", "until"))
    if since and until:
        try:
            check_time_range(since, until, "since", "until")
        except UserError as e:
            return str(e)
    return None


def json_form_error(path: str, query_string: bytes) -> Optional[str]:
    """The fault of a bad field in a request for a recall page's JSON (``path`` ending
    in ``/recall.json`` or ``/recall_knn.json``), or None (not such a request, or no
    bad field): :func:`page_error` of its query string."""
    if not path.endswith(("/recall.json", "/recall_knn.json")):
        return None
    from urllib.parse import parse_qs

    fields = parse_qs(query_string.decode("utf-8", "replace"), keep_blank_values=True)
    return page_error({k: v[0] for k, v in fields.items()})
