"""Store's public API, called directly: open, add, add_many, upsert, update, delete,
delete_many, get, recall and touch, the codes' upkeep, stats and close; read-only refusal
and what a transaction guarantees (all or nothing, the write lock).

Real SQLite through apsw, a real second process (the ``sqlite3`` shell, else Python) holding
the write lock, and the real GGUF model where an embedder is needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional, Sequence

import apsw
import numpy as np
import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.core.migrations import available
from sqlite_rrf.store import UNSET, Episode, RecallResult, Store, StoreError, Written

SHELL = shutil.which("sqlite3")


def vec(i: int) -> List[float]:
    """A 4-dimensional vector; no two of i in 0..6 point the same way."""
    return [1.0, float(i % 7) - 3.0, 0.5, float(i % 3) - 1.0]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def episodes(n: int, prefix: str = "e") -> List[dict]:
    return [
        dict(id=f"{prefix}{i}", content=f"note {i} about the {prefix} vault key", embedding=vec(i))
        for i in range(n)
    ]


@contextlib.contextmanager
def lock_held(db: Path) -> Iterator[None]:
    """Another process holds the write lock (``BEGIN IMMEDIATE``) until the block ends."""
    if SHELL:
        cmd = [SHELL, str(db)]
        start, stop = b"BEGIN IMMEDIATE;\n", b"ROLLBACK;\n.quit\n"
    else:
        cmd = [
            sys.executable,
            "-c",
            "import apsw, sys; c = apsw.Connection(sys.argv[1]); "
            "c.execute('BEGIN IMMEDIATE'); sys.stdin.readline()",
            str(db),
        ]
        start, stop = b"", b"\n"
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert p.stdin is not None
    try:
        p.stdin.write(start)
        p.stdin.flush()
        deadline = time.monotonic() + 30
        while True:
            probe = apsw.Connection(str(db))
            try:
                probe.execute("BEGIN IMMEDIATE")
                probe.execute("ROLLBACK")
            except apsw.BusyError:
                break  # the other process holds it
            finally:
                probe.close()
            assert time.monotonic() < deadline and p.poll() is None, "no lock was taken"
            time.sleep(0.02)
        yield
    finally:
        with contextlib.suppress(OSError):
            p.stdin.write(stop)
            p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ---- open and close ----


def test_open_makes_a_wal_database_at_the_latest_schema(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        assert s.path == str(db)
        assert s.readonly is False and s.opened_as is None
        assert s.conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
        assert s.count() == 0 and s.dim is None and s.model is None
        st = s.stats()
        assert st["episodes"] == 0 and st["path"] == str(db)
        assert st["schema_version"] == max(m.version for m in available())
        conn = s.conn
    with pytest.raises(apsw.ConnectionClosedError):
        conn.execute("SELECT 1")  # the with block closed it


def test_close_closes_the_connection(tmp_path):
    s = Store(tmp_path / "m.db")
    s.add("one note", embedding=vec(1))
    s.close()
    with pytest.raises(apsw.ConnectionClosedError):
        s.count()
    with Store(tmp_path / "m.db") as again:  # what was written stays
        assert again.count() == 1


def test_bad_open_options_are_refused_and_named(tmp_path):
    with pytest.raises(StoreError, match="busy_timeout_ms"):
        Store(tmp_path / "m.db", busy_timeout_ms=-1)
    with pytest.raises(StoreError, match="mmap_size"):
        Store(tmp_path / "m.db", mmap_size=-5)


def test_another_applications_file_is_refused_untouched(tmp_path):
    db = tmp_path / "theirs.db"
    c = apsw.Connection(str(db))
    c.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL)")
    c.close()
    before = digest(db)
    with pytest.raises(StoreError, match="is not a sqlite-rrf database"):
        Store(db)
    assert digest(db) == before


# ---- add, add_many, get ----


def test_add_then_get_returns_what_was_written(tmp_path):
    with Store(tmp_path / "m.db") as s:
        eid = s.add(
            "The backup runs at 02:00.",
            embedding=vec(2),
            importance="high",
            kind="fact",
            metadata={"source": "ops"},
            scope="shop",
            created_at=1_000,
            accessed_at=2_000,
        )
        assert isinstance(eid, str) and len(eid) == 32  # a uuid4 hex
        ep = s.get(eid)
        assert isinstance(ep, Episode)
        assert (ep.content, ep.importance, ep.kind, ep.metadata, ep.scope) == (
            "The backup runs at 02:00.",
            "high",
            "fact",
            {"source": "ops"},
            "shop",
        )
        assert (ep.created_at, ep.accessed_at, ep.access_count) == (1_000, 2_000, 0)
        assert np.allclose(ep.embedding, vec(2))
        assert s.dim == 4  # the first vector fixed the dimension
        assert s.get("no such id") is None
        assert s.count() == 1


def test_add_many_returns_ids_and_stores_a_text_once(tmp_path):
    with Store(tmp_path / "m.db") as s:
        got = s.add_many(
            [
                dict(content="Deploys go out on Tuesdays.", embedding=vec(1)),
                dict(content="deploys  go out on tuesdays.", embedding=vec(1)),
                dict(id="own", content="Deploys go out on Tuesdays.", embedding=vec(1)),
            ]
        )
        assert isinstance(got, Written)
        assert got[0] == got[1] and got[2] == "own"
        assert got.duplicates == (1,) and got.repeats == (2,)
        assert s.count() == 2


def test_a_bad_episode_fails_the_whole_batch(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add("already here", id="keep", embedding=vec(0))
        batch = episodes(4)
        batch[2]["importance"] = "urgent"
        with pytest.raises(StoreError, match="episode 2: importance"):
            s.add_many(batch)
        with pytest.raises(StoreError, match="line 13: .*dimension"):
            s.add_many(
                [dict(content="a", embedding=vec(0)), dict(content="b", embedding=[1.0])],
                labels=["line 12", "line 13"],
            )
        with pytest.raises(StoreError, match="appears twice"):
            s.add_many([dict(id="x", content="a"), dict(id="x", content="b")])
        with pytest.raises(StoreError, match="already exists"):
            s.add_many([dict(id="new", content="n"), dict(id="keep", content="k")])
        assert [r[0] for r in s.conn.execute("SELECT id FROM episodes")] == ["keep"]
        s.add_many([dict(id="keep", content="replaced", embedding=vec(3))], replace=True)
        assert s.get("keep").content == "replaced"


def test_a_write_that_fails_inside_its_transaction_leaves_nothing(tmp_path):
    """The batch passes the checks, and the database refuses its fourth row: no row of
    it is stored, the full-text index holds none of it, and the Store writes again."""
    with Store(tmp_path / "m.db") as s:
        s.conn.execute(
            "CREATE TEMP TRIGGER refuse_e3 BEFORE INSERT ON main.episodes "
            "WHEN NEW.id = 'e3' BEGIN SELECT RAISE(ABORT, 'refused e3'); END"
        )
        with pytest.raises(apsw.ConstraintError, match="refused e3"):
            s.add_many(episodes(6))
        assert s.count() == 0
        assert (
            s.conn.execute(
                "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'vault'"
            ).fetchall()[0][0]
            == 0
        )
        assert s.conn.get_autocommit()  # no transaction left open
        assert s.dim is None  # the dimension the batch would have fixed was not kept
        s.conn.execute("DROP TRIGGER temp.refuse_e3")
        assert len(s.add_many(episodes(6))) == 6 and s.count() == 6


# ---- upsert, update ----


def test_upsert_replaces_the_text_and_keeps_times_and_uses(tmp_path):
    with Store(tmp_path / "m.db") as s:
        assert s.upsert("first text", id="u", embedding=vec(1), created_at=5) == "u"
        s.conn.execute("UPDATE episodes SET access_count = 7, accessed_at = 9 WHERE id = 'u'")
        s.upsert("second text", id="u", embedding=vec(2), kind="fact")
        ep = s.get("u")
        assert (ep.content, ep.kind, ep.created_at, ep.access_count, ep.accessed_at) == (
            "second text",
            "fact",
            5,
            7,
            9,
        )
        assert np.allclose(ep.embedding, vec(2)) and s.count() == 1


def test_update_changes_the_fields_given(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add("the key is in the drawer", id="k", embedding=vec(1), kind="fact", metadata={"a": 1})
        ep = s.update("k", importance="high", metadata=None)
        assert (ep.content, ep.importance, ep.kind, ep.metadata) == (
            "the key is in the drawer",
            "high",
            "fact",
            None,
        )
        assert np.allclose(ep.embedding, vec(1))  # same text: the vector stays
        ep = s.update("k", content="the key is in the safe", kind=UNSET)
        assert ep.content == "the key is in the safe" and ep.kind == "fact"
        assert ep.embedding is None  # no embedder: the old text's vector is dropped
        assert s.missing_embeddings() == 1
        with pytest.raises(StoreError, match="no episode with id 'nope'"):
            s.update("nope", content="x")
        with pytest.raises(StoreError, match="importance"):
            s.update("k", importance="urgent")
        assert s.get("k").importance == "high"


# ---- delete, delete_many ----


def test_delete_and_delete_many(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add_many(episodes(5))
        assert s.delete("e0") is True
        assert s.delete("e0") is False
        with pytest.raises(
            StoreError, match="no episode with id 'zz' \\(nor 1 more\\); nothing was deleted"
        ):
            s.delete_many(["e1", "zz", "yy"])
        assert s.count() == 4
        with pytest.raises(StoreError, match="id: must be text"):
            s.delete_many(["e1", 2])
        assert s.delete_many(["e1", "e2", "e1"]) == 2
        assert sorted(r[0] for r in s.conn.execute("SELECT id FROM episodes")) == ["e3", "e4"]
        # the indexes follow: a deleted episode is never recalled
        hits = s.recall("vault key", qvec=vec(1), collapse=False)
        assert sorted(h.id for h in hits) == ["e3", "e4"]


# ---- recall and touch ----


def test_recall_ranks_and_touches(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add_many(
            [
                dict(
                    id="pg",
                    content="Production Postgres credentials are in Vault.",
                    embedding=[0.9, 0.1, 0.0, 0.1],
                ),
                dict(
                    id="deploy",
                    content="Deploys go out on Tuesdays.",
                    embedding=[0.4, 0.8, 0.0, 0.1],
                ),
                dict(
                    id="style",
                    content="The user prefers British English.",
                    embedding=[0.0, 0.1, 0.9, 0.1],
                ),
            ]
        )
        result = s.recall("postgres credentials", qvec=[0.85, 0.2, 0.0, 0.1])
        assert isinstance(result, RecallResult)
        assert result[0].id == "pg" and result[0].bm25_rank == 1 and result[0].vec_rank == 1
        assert result.touched and result.touch_error is None
        returned = {h.id for h in result}
        for eid, count in s.conn.execute("SELECT id, access_count FROM episodes"):
            assert count == (1 if eid in returned else 0), eid
        later = s.recall("british english", qvec=[0.0, 0.1, 0.9, 0.1], touch=False)
        assert later[0].id == "style" and not later.touched
        before = s.get("style").access_count
        done = s.touch(later)
        assert done.touched and s.get("style").access_count == before + 1
        assert s.touch(done) is done  # a touched result is not touched twice
        with pytest.raises(StoreError, match="qvec"):
            s.recall("postgres", qvec=[1.0, 0.0])  # not the database's dimension


def test_recall_without_an_embedder_uses_the_other_lists(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add_many(episodes(3))
        hits = s.recall("note 1 vault")
        assert hits[0].id == "e1" and hits[0].vec_rank is None


# ---- the codes' upkeep ----


def test_compute_codes_computes_and_fill_codes_also_packs(tmp_path):
    db = tmp_path / "m.db"
    Store(db).close()
    plain = apsw.Connection(str(db))  # no extension: the codes stay pending
    with plain:
        plain.executemany(
            "INSERT INTO episodes(id, content, embedding, created_at, accessed_at) "
            "VALUES (?, ?, ?, 1, 1)",
            [
                (
                    f"p{i}",
                    f"plain note {i}",
                    np.asarray([1.0, i - 150.0, 0.5, -1.0], "<f4").tobytes(),
                )
                for i in range(300)
            ],
        )
    plain.close()

    def pending(s: Store) -> int:
        return s.conn.execute("SELECT count(*) FROM episodes_codes WHERE code IS NULL").fetchall()[
            0
        ][0]

    def blocks(s: Store) -> int:
        return s.conn.execute("SELECT count(*) FROM episodes_code_blocks").fetchall()[0][0]

    with Store(db) as s:  # an open does no upkeep
        assert pending(s) == 300
        assert s.compute_codes() == 300
        assert pending(s) == 0 and blocks(s) == 0  # computed, not packed
        assert s.pack_codes() == Store.CODE_BLOCK and blocks(s) == 1
        other = apsw.Connection(str(db))  # another client: no TEMP trigger computes
        other.execute("DELETE FROM episodes_code_blocks")  # their codes become loose
        other.execute("UPDATE episodes_codes SET code = NULL")
        other.close()
        assert pending(s) == 300 and blocks(s) == 0
        assert s.fill_codes() == 300
        assert pending(s) == 0 and blocks(s) == 1


def test_maintain_reports_what_it_did(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(episodes(20))
        other = apsw.Connection(str(db))  # another client: no TEMP trigger computes
        other.execute("UPDATE episodes_codes SET code = NULL")
        other.close()
        done = s.maintain()
        assert done["codes_filled"] == 20
        assert set(done) == {"codes_filled", "codes_packed", "stopwords_refreshed", "fts_merges"}


# ---- stats ----


def test_stats_counts(tmp_path):
    with Store(tmp_path / "m.db") as s:
        s.add_many(episodes(3))
        s.add("no vector here", importance="low", created_at=10)
        s.recall("vault", qvec=vec(0))
        st = s.stats()
        assert st["episodes"] == 4 and st["with_embedding"] == 3
        assert st["embedding_dim"] == 4 and st["oldest_created_at"] == 10
        assert st["by_importance"] == {"low": 1, "normal": 3}
        assert st["total_accesses"] >= 1 and st["size_bytes"] > 0
        assert st["bm25_stopwords"] == s.stopwords


# ---- read-only ----


def test_a_read_only_store_refuses_every_write_and_changes_nothing(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(episodes(5))
    before = digest(db)
    with Store(db, readonly=True) as s:
        assert s.readonly
        refused = {
            "add": lambda: s.add("new", embedding=vec(1)),
            "add_many": lambda: s.add_many(episodes(2, "n")),
            "upsert": lambda: s.upsert("x", id="e1", embedding=vec(1)),
            "update": lambda: s.update("e1", importance="high"),
            "delete": lambda: s.delete("e1"),
            "delete_many": lambda: s.delete_many(["e1", "e2"]),
            "maintain": lambda: s.maintain(),
        }
        for name, call in refused.items():
            with pytest.raises(StoreError, match="is read-only"):
                call()
        assert s.fill_codes() == 0 and s.pack_codes() == 0 and s.fill_keys() == 0
        result = s.recall("vault key", qvec=vec(1))
        assert len(result) and not result.touched
        assert "read-only" in (result.touch_error or "")
        assert s.count() == 5 and s.get("e1").importance == "normal"
    assert digest(db) == before


# ---- the write lock ----


def test_every_write_under_another_process_lock_fails_with_nothing_written(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        s.add_many(episodes(3))
    with Store(db, busy_timeout_ms=200) as s, lock_held(db):
        for call in (
            lambda: s.add("held", embedding=vec(4)),
            lambda: s.upsert("held", id="e0", embedding=vec(4)),
            lambda: s.update("e1", importance="high"),
            lambda: s.delete("e2"),
            lambda: s.delete_many(["e0", "e1"]),
        ):
            with pytest.raises(
                StoreError,
                match="another process held the write lock for "
                "the whole busy timeout \\(0.2 s\\), so "
                "nothing was written",
            ):
                call()
        # reads never wait for the lock; the touch gives up and says why
        result = s.recall("vault", qvec=vec(0))
        assert len(result) == 3 and not result.touched and "write lock" in result.touch_error
    with Store(db) as s:
        assert s.count() == 3
        assert [s.get(f"e{i}").content for i in range(3)] == [e["content"] for e in episodes(3)]
        assert s.get("e1").importance == "normal"


def test_busy_timeout_is_settable_and_checked(tmp_path):
    with Store(tmp_path / "m.db") as s:
        assert s.busy_timeout_ms == 10_000
        s.busy_timeout_ms = 50
        assert s.busy_timeout_ms == 50
        with pytest.raises(StoreError, match="busy_timeout_ms"):
            s.busy_timeout_ms = True  # type: ignore[assignment]


# ---- an embedder: the real model, and the protocol ----


class WordHash:
    """An embedder in the sense of :class:`sqlite_rrf.store.EmbedderLike` (dim, embed,
    embed_many), of its own dimension: not the model's."""

    dim = 8
    model_name = "word-hash"

    def embed(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, "<f4")
        for w in text.lower().split():
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        v[0] += 0.01
        return v / np.linalg.norm(v)

    def embed_many(self, texts: Sequence[str], *, progress: Optional[bool] = None) -> np.ndarray:
        return np.stack([self.embed(t) for t in texts])


def test_any_object_with_the_protocol_embeds(tmp_path):
    with Store(tmp_path / "m.db", embedder=WordHash()) as s:
        s.add("alpha beta gamma", id="a")
        s.add("delta epsilon", id="d")
        assert s.dim == 8 and s.model == "word-hash"
        assert s.get("a").embedding.shape == (8,)
        assert s.recall("delta epsilon")[0].id == "d"


@needs_model
def test_the_real_model_embeds_binds_and_refuses_another(tmp_path):
    from sqlite_rrf.embedding.embedder import Embedder

    db = tmp_path / "m.db"
    with Embedder(embedding_model()) as emb:
        with Store(db, embedder=emb) as s:
            s.add_many(
                [
                    dict(id="db", content="We chose SQLite for the agent's memory."),
                    dict(id="cat", content="The cat sleeps on the windowsill all day."),
                    dict(id="tz", content="The team works in the Lisbon time zone."),
                ]
            )
            assert s.dim == emb.dim and s.model
            assert s.missing_embeddings() == 0
            assert s.recall("which database did we pick?")[0].id == "db"
            # without the model, then embedded later
            s.attach_embedder(None)
            s.add("Lunch is at noon on Fridays.", id="lunch")
            assert s.missing_embeddings() == 1
            s.attach_embedder(emb)
            assert s.embed_missing() == 1 and s.missing_embeddings() == 0
            assert s.recall("when do we eat on friday")[0].id == "lunch"
    with Store(db) as s:
        with pytest.raises(StoreError, match=f"holds {s.dim}-dimensional embeddings"):
            s.attach_embedder(WordHash())
        assert s.dim != WordHash.dim  # nothing changed
