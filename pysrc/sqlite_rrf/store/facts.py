"""Facts that replace others (``episodes.superseded_by``, migration 0012) and the hint that
a new text may update an older one.

* :func:`check_replaces` and :func:`supersede`: in the write transaction, the episode a
  new one ``replaces`` must exist; after the write it is marked superseded by the new one
  (kept, and left out of every recall unless ``include_superseded``), and the new one is
  current.
* :func:`superseded_twin`: the superseded episode whose text a new one repeats (an import
  never brings such a text back; a ``remember`` says which fact replaced it).
* :func:`likely_update`: the current episode of the same scope nearest to a new one by
  cosine, when the two are about the same thing (cosine at least
  :data:`LIKELY_UPDATE_COSINE`) and differ in a number, a day or a name.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple

import apsw

from ..core import dedupe as _dedupe
from ..core.validate import StoreError

#: The cosine (all-MiniLM-L6-v2) from which a new text's nearest episode of its scope is
#: named as one it may update: the lowest at which at most 10 % of new facts whose nearest
#: sentence is not an update get a hint. Measured by tests/bench/measure_likely_update.py
#: on the LongMemEval_S dev half's knowledge-update questions (sentences; 35 pairs): it
#: fires on 40 % of real updates and 8.6 % of nearest non-updates.
LIKELY_UPDATE_COSINE = 0.70

_WORD = re.compile(r"\w+", re.UNICODE)
#: Words that name a day or a month (English), which a change of schedule changes.
_DAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
    "thursdays fridays saturdays sundays weekday weekdays weekend weekends today tomorrow "
    "yesterday daily weekly monthly yearly january february march april may june july "
    "august september october november december morning afternoon evening night noon "
    "midnight".split()
)
#: Number words (a count that changed: "two replicas" → "three replicas").
_NUMBERS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve twenty thirty "
    "forty fifty hundred thousand million once twice".split()
)


def _words(text: str) -> Tuple[set, set]:
    """The text's words case folded, and those written with a capital letter where a
    sentence does not start (names)."""
    words, names = set(), set()
    for m in _WORD.finditer(text):
        w = m.group(0)
        words.add(w.casefold())
        before = text[: m.start()].rstrip()
        if w[:1].isupper() and before and before[-1] not in ".!?:;\"'(":
            names.add(w.casefold())
    return words, names


def differs_in_detail(old: str, new: str) -> Optional[str]:
    """What kind of detail ``new`` changes in ``old`` (``"a number"``, ``"a day"``,
    ``"a name"``), or None when they do not differ in one (the same words, or only other
    words)."""
    wo, no = _words(old)
    wn, nn = _words(new)
    changed = wo ^ wn
    if not changed:
        return None
    if any(any(c.isdigit() for c in w) or w in _NUMBERS for w in changed):
        return "a number"
    if changed & _DAYS:
        return "a day"
    if changed & (no | nn):
        return "a name"
    return None


def check_replaces(conn: Any, rows: Sequence[Dict[str, Any]]) -> None:
    """Before the rows are written (and again in the write transaction): every episode a
    row ``replaces`` exists, or is another row of the batch (else a :class:`StoreError`
    naming ``replaces``, after the row's ``label`` when it has one)."""
    batch = {r["id"] for r in rows}
    for row in rows:
        old = row.get("replaces")
        if old is None or old in batch:
            continue
        if not conn.execute("SELECT 1 FROM episodes WHERE id = ?", (old,)).fetchall():
            label = f"{row['label']}: " if row.get("label") else ""
            raise StoreError(f"{label}replaces: no episode with id {old!r}; nothing was written")


def supersede(conn: Any, rows: Sequence[Dict[str, Any]]) -> None:
    """In the write transaction, after the rows are written (their ids final): each
    episode a row ``replaces`` is marked superseded by the row's episode, which is made
    current (a fact asserted again with ``replaces`` is current again), and so are the
    replaced episode's copies (the same text in its scope, stored with ids of their own).
    A row whose text is the replaced episode's own (the same episode) replaces nothing."""
    for row in rows:
        old = row.get("replaces")
        if old is None or old == row["id"]:
            continue
        conn.execute("UPDATE episodes SET superseded_by = NULL WHERE id = ?", (row["id"],))
        conn.execute("UPDATE episodes SET superseded_by = ? WHERE id = ?", (row["id"], old))
        # its copies (the same text in its scope, ids of their own) are the same old fact
        for key, scope, text in conn.execute(
            "SELECT content_key, scope, content FROM episodes WHERE id = ?", (old,)
        ).fetchall():
            if key is None or not isinstance(text, str):
                continue
            norm = _dedupe.normalise(text)
            for eid, content in conn.execute(
                "SELECT id, content FROM episodes INDEXED BY idx_episodes_content_key "
                "WHERE content_key = ? AND scope = ? AND superseded_by IS NULL AND id != ?",
                (key, scope, row["id"]),
            ).fetchall():
                if isinstance(content, str) and _dedupe.normalise(content) == norm:
                    conn.execute(
                        "UPDATE episodes SET superseded_by = ? WHERE id = ?", (row["id"], eid)
                    )


def superseded_twin(conn: Any, row: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """``(id, superseded_by)`` of a superseded episode of the row's scope whose text is the
    row's (the same after :func:`sqlite_rrf.core.dedupe.normalise`), or None. Keys must be
    filled (:meth:`Store.fill_keys`)."""
    norm = None
    for eid, content, by in conn.execute(
        "SELECT id, content, superseded_by FROM episodes INDEXED BY idx_episodes_content_key "
        "WHERE content_key = ? AND scope = ? AND superseded_by IS NOT NULL ORDER BY rowid",
        (row["content_key"], row["scope"]),
    ):
        if norm is None:
            norm = _dedupe.normalise(row["content"])
        if isinstance(content, str) and _dedupe.normalise(content) == norm:
            return eid, by
    return None


def likely_update(
    conn: Any, id: str, threshold: float = LIKELY_UPDATE_COSINE
) -> Optional[Tuple[str, float, str]]:
    """``(id, cosine, what)`` of the current episode of the scope of episode ``id``
    nearest to it by cosine, when the cosine is at least ``threshold`` and the texts
    differ in a detail (:func:`differs_in_detail` says ``what``); else None (also when
    the episode has no embedding, or the scan fails on another client's bad vector)."""
    rows = conn.execute(
        "SELECT rowid, content, scope, embedding FROM episodes WHERE id = ?", (id,)
    ).fetchall()
    if not rows or not isinstance(rows[0][3], bytes):
        return None
    rowid, content, scope, emb = rows[0]
    try:
        near = conn.execute(
            "SELECT id, content, vec_cosine(embedding, :q) AS cos FROM episodes "
            "WHERE scope = :scope AND rowid != :rowid AND superseded_by IS NULL "
            "AND typeof(embedding) = 'blob' AND length(embedding) = length(:q) "
            "ORDER BY cos DESC LIMIT 1",
            {"q": emb, "scope": scope, "rowid": rowid},
        ).fetchall()
    except apsw.Error:
        return None
    if not near or near[0][2] is None or near[0][2] < threshold:
        return None
    other, text, cos = near[0]
    what = differs_in_detail(str(text), str(content))
    if what is None:
        return None
    return other, float(cos), what
