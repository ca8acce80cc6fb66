"""The Store's reads for a memory's management (store/records.py, store/stats.py): what
``sqlite-rrf list/get/forget/export/vacuum/stats`` and MCP read instead of running SQL of
their own."""

from __future__ import annotations

import apsw
import pytest

from sqlite_rrf.store import RECORD_COLUMNS, EpisodeFilter, Store, StoreError


def filled(path) -> Store:
    s = Store(path)
    s.add_many(
        [
            dict(id="a", content="alpha", scope="p", kind="fact", created_at=1000),
            dict(id="b", content="beta", scope="p", kind="todo", created_at=2000),
            dict(id="c", content="gamma", scope="", kind="fact", created_at=3000),
            dict(id="d", content="delta", scope="q", created_at=4000, replaces="a"),
        ]
    )
    return s


def test_episode_rows_pages_filters_and_counts(tmp_path):
    with filled(tmp_path / "m.db") as s:
        rows, total = s.episode_rows()
        assert [r[0] for r in rows] == ["d", "c", "b", "a"] and total == 4  # newest first
        assert all(len(r) == len(RECORD_COLUMNS) for r in rows)
        rows, total = s.episode_rows(limit=2, include_superseded=False)
        assert [r[0] for r in rows] == ["d", "c"] and total == 3  # a was replaced by d
        rows, total = s.episode_rows(EpisodeFilter(scope="p", kind="fact"))
        assert [r[0] for r in rows] == ["a"] and total == 1
        rows, total = s.episode_rows(EpisodeFilter(since=2000, until=4000))
        assert [r[0] for r in rows] == ["c", "b"] and total == 2  # until is exclusive
        assert s.matching_ids(EpisodeFilter(scope="")) == ["c"]
        assert s.matching_ids(EpisodeFilter(scope="nowhere")) == []


def test_episode_row_and_what_it_replaced(tmp_path):
    with filled(tmp_path / "m.db") as s:
        row = dict(zip(RECORD_COLUMNS, s.episode_row("a")))
        assert row["content"] == "alpha" and row["superseded_by"] == "d"
        assert s.episode_row("nope") is None
        assert s.replaced("d") == ["a"] and s.replaced("a") == []


def test_export_rows_are_oldest_first_with_the_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "m.db"
    filled(path).close()
    raw = apsw.Connection(str(path))  # another client writes bytes that are not UTF-8
    raw.execute("UPDATE episodes SET kind = CAST(x'ff61' AS TEXT) WHERE id = 'b'")
    raw.close()
    with Store(path) as s:
        out = list(s.export_rows())
        assert [r[0] for r, _ in out] == ["a", "b", "c", "d"]
        bad = {r[0]: b for r, b in out if b}
        assert bad == {"b": {"kind": b"\xffa"}}
        assert [r[0] for r, _ in s.export_rows(EpisodeFilter(kind="fact"))] == ["a", "c"]


def test_scope_counts_by_size_or_by_name(tmp_path):
    with filled(tmp_path / "m.db") as s:
        assert s.scope_counts() == [("p", 2), ("", 1), ("q", 1)]
        assert s.scope_counts(by_name=True) == [("", 1), ("p", 2), ("q", 1)]
        assert s.scope_counts(most=1) == [("p", 2)]


def test_add_meta_never_writes_over_a_key(tmp_path):
    with filled(tmp_path / "m.db") as s:
        s.add_meta("my_app_mark", 1)
        assert s.meta("my_app_mark") == 1
        with pytest.raises(StoreError, match="already has the key 'my_app_mark'"):
            s.add_meta("my_app_mark", 2)
        assert s.meta("my_app_mark") == 1


def test_free_bytes_and_vacuum_give_the_space_back(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add_many([dict(id=f"e{i}", content=f"note {i} " + "x" * 2000) for i in range(200)])
        s.delete_many([f"e{i}" for i in range(200)])
        assert s.free_bytes() > 100_000
        assert s.vacuum() is True  # nobody else reads: the -wal is emptied
        assert s.free_bytes() == 0 and s.count() == 0


def test_knn_vectors_is_zero_without_the_index(tmp_path):
    with filled(tmp_path / "m.db") as s:
        assert s.knn_vectors() == 0
