"""Writes from any client keep the indexes right (migration
0004, sql/knn.sql, docs/schema.md).

A client here is the Debian ``sqlite3`` 3.40 shell (``/usr/bin/sqlite3``) or an apsw
connection, neither with the rrf extension loaded and both with
``recursive_triggers`` OFF (the shell's default, asserted) unless a test says
otherwise. After each write the tests run FTS5's own ``integrity-check`` with rank
1, which compares the index with the external content table, and, where the knn
index exists, compare ``episodes_vec`` with the embedded episodes (same rowids,
same vectors). They also compare MATCH results with those of an FTS5 index built
afresh from the same rows, check FTS5's row count and that ``episodes_displaced``
holds nothing but copies of live rows, and run every write a second time on a copy
of the database without the index triggers: the write must meet the same refusal
(or none) and leave the same rows, so the triggers never change what a write does
to ``episodes`` itself.

What is tested:

- the issue's cases, through the shell: INSERT OR REPLACE then MATCH 'vault'; on a
  knn database, REPLACE then DELETE then ``Store.add`` with an embedding; ``UPDATE
  episodes SET rowid = 9000 WHERE id = 'e10'`` then finding e10 by its words; a 3-d
  then a 4-d blob; ``PRAGMA trusted_schema=OFF``;
- every kind of write, one by one (INSERT, OR REPLACE on id, rowid and both,
  REPLACE INTO, OR IGNORE, OR FAIL, OR ABORT, OR ROLLBACK, UPSERT DO UPDATE / DO
  NOTHING, UPDATE of every indexed column, rowid and id, UPDATE OR REPLACE /
  OR IGNORE that collide, DELETE, multi-row statements, INSERT ... SELECT), with
  recursive_triggers OFF and ON, with and without the knn index;
- random sequences of such writes: a seeded one through the shell, with an
  integrity-check after every statement, and hypothesis-driven ones through apsw;
- writes that collide on the rowid, the id or both (the churn soak's ``UPDATE OR
  REPLACE episodes SET rowid = 2837 WHERE id = 's88'`` in small), each under every OR
  clause and as REPLACE INTO, through the shell and through apsw, with an
  integrity-check after each; and the fact the triggers rely on there: FTS5 over a
  content table ignores the writer's OR REPLACE in SQLite 3.40 and 3.54 alike;
- a client without sqlite-vec on a knn database is refused every write whole;
- migration 0004 repairs the drift the old schema let in (FTS5 and episodes_vec)
  and keeps every row's rowid and values; a knn database cannot be migrated by a
  connection without sqlite-vec, and is left as it was;
- the controls: the same checks fail on the schema before 0004, so they can fail.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sqlite_rrf
from sqlite_rrf.core.migrations import MigrationError, available, current_version, migrate
from sqlite_rrf.core.sql_files import read_sql
from sqlite_rrf.doctor import check_data
from sqlite_rrf.store import Store, StoreError

try:
    import sqlite_vec

    VEC_PATH: Optional[str] = sqlite_vec.loadable_path()
except ImportError:  # pragma: no cover - the [knn] extra is installed in the test venv
    VEC_PATH = None

SHELL = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(SHELL is None, reason="the sqlite3 shell is not installed")
needs_vec = pytest.mark.skipif(VEC_PATH is None, reason="sqlite-vec is not installed")

DIM = 4
#: porter leaves these words as they are, so a MATCH on one is "the word is in the text"
WORDS = ("cat", "dog", "fish", "bird", "tree", "vault")
IDS = ("a", "b", "c", "d", "e", "f", "g")

#: sql/knn.sql as it was before migration 0004: what a database that had the knn index
#: carries until it is migrated.
OLD_KNN_SQL = """
CREATE VIRTUAL TABLE episodes_vec USING vec0(
  embedding float[{dim}] distance_metric=cosine
);
INSERT INTO episodes_vec(rowid, embedding)
  SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL;
CREATE TRIGGER episodes_vec_insert AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL BEGIN
  INSERT INTO episodes_vec(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);
END;
CREATE TRIGGER episodes_vec_delete AFTER DELETE ON episodes BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
END;
CREATE TRIGGER episodes_vec_update AFTER UPDATE OF embedding ON episodes BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
  INSERT INTO episodes_vec(rowid, embedding)
    SELECT NEW.rowid, NEW.embedding WHERE NEW.embedding IS NOT NULL;
END;
INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('knn', 'episodes_vec');
"""


# ---------------------------------------------------------------- helpers


def f32(values: Sequence[float]) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def hexlit(blob: bytes) -> str:
    return f"X'{blob.hex().upper()}'"


def plain(path, *, vec: bool = False, recursive: bool = False) -> apsw.Connection:
    """An apsw connection without the rrf extension (sqlite-vec only if ``vec``)."""
    c = apsw.Connection(str(path))
    c.set_busy_timeout(10_000)
    if vec:
        c.enable_load_extension(True)
        c.load_extension(VEC_PATH)
        c.enable_load_extension(False)
    c.execute(f"PRAGMA recursive_triggers = {'ON' if recursive else 'OFF'}")
    return c


def has_knn(conn) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episodes_vec'").fetchall())


def fts_integrity(conn) -> None:
    """FTS5's integrity-check against the content table (rank 1); raises
    apsw.CorruptError when the index and episodes disagree."""
    conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")


def match(conn, word: str) -> set:
    return {
        r
        for (r,) in conn.execute(
            "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?", (word,)
        )
    }


def varint(buf: bytes) -> int:
    """The first SQLite varint of ``buf`` (FTS5 writes its row count as one)."""
    v = 0
    for i, b in enumerate(buf[:9]):
        if i == 8:
            return (v << 8) | b
        v = (v << 7) | (b & 0x7F)
        if b < 0x80:
            return v
    return v


def check_consistent(conn) -> None:
    """Everything this file promises about the indexes, on ``conn``'s database."""
    fts_integrity(conn)
    rows = dict(conn.execute("SELECT rowid, content FROM episodes"))
    # FTS5's row count (first varint of its averages record, written at commit) is
    # the table's
    if conn.getautocommit():
        avg = conn.execute("SELECT block FROM episodes_fts_data WHERE id = 1").fetchall()
        assert (varint(avg[0][0]) if avg else 0) == len(rows)
    # MATCH answers as an index built afresh from the same rows answers
    conn.execute("CREATE VIRTUAL TABLE temp.ref USING fts5(content, tokenize = 'porter unicode61')")
    try:
        conn.executemany("INSERT INTO temp.ref(rowid, content) VALUES (?, ?)", rows.items())
        words = set(WORDS) | {
            w
            for c in rows.values()
            if isinstance(c, str)
            for w in re.findall(r"[a-z0-9]+", c.lower())
        }
        for w in sorted(words)[:60]:
            want = {
                r
                for (r,) in conn.execute(
                    "SELECT rowid FROM temp.ref WHERE ref MATCH ?", (f'"{w}"',)
                )
            }
            assert match(conn, f'"{w}"') == want, w
    finally:
        conn.execute("DROP TABLE temp.ref")
    # the displaced rows are only ever copies of live rows, never left marked gone
    stale = conn.execute(
        "SELECT d.rowid FROM episodes_displaced AS d LEFT JOIN episodes AS e USING (rowid) "
        "WHERE e.rowid IS NULL OR e.content IS NOT d.content OR d.gone != 0"
    ).fetchall()
    assert stale == [], f"episodes_displaced holds rows that are not live: {stale}"
    # every vector has the database's dimension
    dim = conn.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall()
    lengths = {
        n
        for (n,) in conn.execute(
            "SELECT DISTINCT length(embedding) FROM episodes WHERE embedding IS NOT NULL"
        )
    }
    if dim:
        assert lengths <= {4 * dim[0][0]}, (lengths, dim)
    else:
        assert not lengths
    emb = dict(conn.execute("SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL"))
    if has_knn(conn):
        vec = dict(conn.execute("SELECT rowid, embedding FROM episodes_vec"))
        assert vec == emb, (
            sorted(set(vec) ^ set(emb)),
            sorted(r for r in set(vec) & set(emb) if vec[r] != emb[r]),
        )
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episodes_codes'").fetchall():
        # migration 0007: the narrow copy holds every embedding, and a code is either
        # pending (NULL) or the sign code of the embedding it sits beside, never stale
        narrow = dict(conn.execute("SELECT rowid, embedding FROM episodes_vectors"))
        assert narrow == emb, (
            sorted(set(narrow) ^ set(emb)),
            sorted(r for r in set(narrow) & set(emb) if narrow[r] != emb[r]),
        )
        codes = dict(conn.execute("SELECT rowid, code FROM episodes_codes"))
        assert set(codes) == set(emb), sorted(set(codes) ^ set(emb))
        for r, code in codes.items():
            if code is not None:
                want = np.packbits(np.frombuffer(emb[r], "<f4") > 0, bitorder="little")
                assert code == want.tobytes(), r
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episodes_code_blocks'").fetchall():
        check_blocks(conn)
    if current_version(conn) >= 9:
        # the product's own check (sqlite-rrf check) agrees: nothing it can repair is wrong
        found = [f for f in check_data(conn) if f.repairable]
        assert found == [], found


def check_blocks(conn) -> None:
    """Migration 0008: every block holds exactly the current codes of the rows that
    name it, in its rowids' order; a row naming no block (loose or pending) is in none."""
    rows = conn.execute("SELECT rowid, code, block FROM episodes_codes").fetchall()
    members: Dict[int, Dict[int, bytes]] = {}
    for r, code, block in rows:
        if block is not None:
            assert code is not None, f"the pending row {r} is in block {block}"
            members.setdefault(block, {})[r] = code
    in_blocks = set()
    for block, n, rowids, codes in conn.execute(
        "SELECT block, n, rowids, codes FROM episodes_code_blocks"
    ):
        ids = np.frombuffer(rowids, "<i8").tolist()
        assert n == len(ids) > 0, (block, n, len(ids))
        assert len(codes) % n == 0, block
        width = len(codes) // n
        got = {r: codes[i * width : (i + 1) * width] for i, r in enumerate(ids)}
        assert len(got) == n, f"block {block} holds a rowid twice"
        assert got == members.get(block, {}), f"block {block} is not its rows' current codes"
        assert not in_blocks & set(ids), f"block {block} shares rows with another block"
        in_blocks |= set(ids)
    assert set(members) <= {b for (b,) in conn.execute("SELECT block FROM episodes_code_blocks")}, (
        "a row names a block that does not exist"
    )


def dump(conn) -> List[tuple]:
    """Every column of every episode, by rowid."""
    return conn.execute("SELECT rowid, * FROM episodes ORDER BY rowid").fetchall()


def same_rows(conn) -> List[tuple]:
    """:func:`dump`, with the times the column defaults gave ("now", which differs by
    a millisecond between two databases) shown as 'now'; the test data's own times
    are small numbers."""
    return conn.execute(
        "SELECT rowid, id, content, embedding, "
        "CASE WHEN created_at > 1e12 THEN 'now' ELSE created_at END, "
        "CASE WHEN accessed_at > 1e12 THEN 'now' ELSE accessed_at END, "
        "access_count, importance, kind, metadata, strength, depth, session_spread, stability "
        "FROM episodes ORDER BY rowid"
    ).fetchall()


def shell(
    db, script: str, *, vec: bool = False, rrf: bool = False, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run ``script`` in the Debian sqlite3 shell on ``db`` (no rrf unless ``rrf``)."""
    head = []
    if vec:
        head.append(f".load {VEC_PATH}")
    if rrf:
        head.append(f".load {sqlite_rrf.loadable_path()}")
    return subprocess.run(
        [SHELL, "-batch", str(db)],
        input="\n".join(head + [script]) + "\n",
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def shell_ok(db, script: str, **kw) -> str:
    out = shell(db, script, **kw)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return out.stdout


def seed_episodes(n: int = 20, dim: int = DIM, every: int = 1) -> List[dict]:
    rng = np.random.default_rng(11)
    return [
        dict(
            id=f"e{i}",
            content=f"episode e{i} zebra{i} {WORDS[i % len(WORDS)]}",
            embedding=rng.normal(size=dim) if i % every == 0 else None,
        )
        for i in range(n)
    ]


def new_store(path, *, knn: bool = False, episodes: Optional[List[dict]] = None) -> Path:
    """A database made by the Store (all migrations), optionally with the knn index."""
    with Store(path) as s:
        s.add_many(seed_episodes() if episodes is None else episodes)
        if knn:
            s.enable_knn()
    return Path(path)


def db_before_0004(path, episodes: List[dict], *, knn: bool = False) -> Path:
    """A database at schema version 3 (what sqlite-rrf made before migration 0004),
    filled with plain SQL, with the old knn triggers if ``knn``."""
    c = plain(path, vec=knn)
    migrate(c, [m for m in available() if m.version <= 3])
    assert current_version(c) == 3
    with c:
        c.execute("INSERT INTO rrf_meta VALUES ('embedding_dim', ?)", (DIM,))
        for ep in episodes:
            emb = ep.get("embedding")
            c.execute(
                "INSERT INTO episodes(id, content, embedding) VALUES (?, ?, ?)",
                (ep["id"], ep["content"], None if emb is None else f32(emb)),
            )
        if knn:
            c.execute(OLD_KNN_SQL.replace("{dim}", str(DIM)))
    c.close()
    return Path(path)


# ---------------------------------------------------------------- the shell harness

ALLOWED_ERRORS = re.compile(
    r"constraint failed|must be a float32 blob|datatype mismatch|no transaction is active"
)


def shell_session(
    db, statements: Sequence[str], *, vec: bool = False, check: bool = True
) -> Tuple[Dict[int, str], List[str]]:
    """Run each statement (one per line) in one shell session, each followed by FTS5's
    integrity-check when ``check``. Returns ({statement number: its error}, problems),
    the problems being integrity failures and any error but the refusals a write may
    meet (constraints, the dimension, a transaction already rolled back)."""
    lines = ["PRAGMA recursive_triggers;"]
    marks = {}
    for i, s in enumerate(statements):
        assert "\n" not in s
        lines.append(s + ";")
        marks[len(lines)] = ("write", i)
        if check:
            lines.append(
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);"
            )
            marks[len(lines)] = ("check", i)
    head = 1 if vec else 0  # the .load line comes first
    out = shell(db, "\n".join(lines), vec=vec)
    assert out.stdout.splitlines()[:1] == ["0"], "recursive_triggers is OFF in the shell"
    errors, problems = {}, []
    found = re.findall(r"(?:Parse|Runtime) error near line (\d+): (.*)", out.stderr)
    for line, message in found:
        kind, i = marks.get(int(line) - head, ("?", -1))
        if kind == "write":
            errors[i] = message
        if kind != "write" or not ALLOWED_ERRORS.search(message):
            problems.append(
                f"{kind} after statement {i} ({statements[i] if i >= 0 else '?'}): {message}"
            )
    if out.stderr.count("error near line") != len(found):
        problems.append(out.stderr)
    return errors, problems


def run_shell_writes(db, statements: Sequence[str], *, vec: bool = False) -> List[str]:
    """The problems of :func:`shell_session` (empty when every check passed)."""
    return shell_session(db, statements, vec=vec)[1]


#: The triggers that maintain the indexes; without them episodes is a plain table
#: (the dimension's triggers stay), which is what the writes must see.
INDEX_TRIGGERS = (
    "episodes_displace_insert",
    "episodes_fts_insert",
    "episodes_displace_update",
    "episodes_fts_update",
    "episodes_fts_delete",
    "episodes_vec_insert",
    "episodes_vec_update",
    "episodes_vec_delete",
)


def without_index_triggers(conn) -> None:
    for name in INDEX_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")


def outcome(conn, sql: str) -> str:
    """Run ``sql``; 'ok' or the error class and message a write may meet. Any other
    error fails the test."""
    try:
        conn.execute(sql)
        return "ok"
    except (apsw.ConstraintError, apsw.MismatchError) as e:
        return f"{type(e).__name__}: {e}"
    except apsw.SQLError as e:
        # a COMMIT or ROLLBACK after OR ROLLBACK already ended the transaction
        assert "no transaction is active" in str(e), (sql, e)
        return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- random writes


class Chooser:
    """The choices of a random write, from a seeded Random or from hypothesis."""

    def __init__(self, rng: Optional[random.Random] = None, data=None):
        self.rng, self.data = rng, data

    def pick(self, seq):
        seq = list(seq)
        if self.data is not None:
            return self.data.draw(st.sampled_from(seq))
        return self.rng.choice(seq)

    def int(self, lo: int, hi: int) -> int:
        if self.data is not None:
            return self.data.draw(st.integers(lo, hi))
        return self.rng.randint(lo, hi)


VECS = [f32(v) for v in ([1, 0, 0, 0], [0, 1, 0, 0], [0.5, -0.5, 2, 1], [3, 1, 4, 1])]
BAD_VECS = [f32([1, 2, 3]), b"", b"\x00" * 5, "'[1,2,3,4]'"]
CONFLICT = ("", "OR REPLACE ", "OR IGNORE ", "OR FAIL ", "OR ABORT ", "OR ROLLBACK ")


def _text(c: Chooser) -> str:
    return "'" + " ".join(c.pick(WORDS) for _ in range(c.int(1, 3))) + "'"


def _vec(c: Chooser) -> str:
    k = c.int(0, 19)
    if k == 0:
        bad = c.pick(range(len(BAD_VECS)))
        v = BAD_VECS[bad]
        return v if isinstance(v, str) else hexlit(v)
    if k < 6:
        return "NULL"
    return hexlit(c.pick(VECS))


def _rowid(c: Chooser) -> str:
    return str(c.pick([1, 2, 3, 4, 5, 6, 7, 8, -1, 100]))


def _where(c: Chooser) -> str:
    k = c.int(0, 5)
    if k == 0:
        return f"id = '{c.pick(IDS)}'"
    if k == 1:
        return f"rowid = {_rowid(c)}"
    if k == 2:
        return f"rowid > {c.int(0, 6)}"
    if k == 3:
        return f"id IN ('{c.pick(IDS)}', '{c.pick(IDS)}')"
    if k == 4:
        return f"content LIKE '%{c.pick(WORDS)}%'"
    return "1"


def random_write(c: Chooser) -> str:
    """One random write to episodes, as one line of SQL with literals."""
    kind = c.pick(
        [
            "insert",
            "insert",
            "insert",
            "replace",
            "insert_select",
            "upsert",
            "upsert",
            "update",
            "update",
            "update",
            "delete",
        ]
    )
    if kind in ("insert", "replace"):
        with_rowid = c.int(0, 2) == 0
        cols = "rowid, id, content, embedding" if with_rowid else "id, content, embedding"
        values = []
        for _ in range(c.int(1, 3)):
            v = [f"'{c.pick(IDS)}'", _text(c), _vec(c)]
            values.append("(" + ", ".join(([_rowid(c)] if with_rowid else []) + v) + ")")
        verb = "REPLACE" if kind == "replace" else f"INSERT {c.pick(CONFLICT)}"
        return f"{verb} INTO episodes({cols}) VALUES {', '.join(values)}"
    if kind == "insert_select":
        suffix = c.pick(["", "", "x"])
        return (
            f"INSERT {c.pick(CONFLICT)}INTO episodes(id, content, embedding) "
            f"SELECT id || '{suffix}', content || ' {c.pick(WORDS)}', embedding "
            f"FROM episodes WHERE {_where(c)}"
        )
    if kind == "upsert":
        head = (
            f"INSERT INTO episodes(id, content, embedding) "
            f"VALUES ('{c.pick(IDS)}', {_text(c)}, {_vec(c)}) "
        )
        k = c.int(0, 3)
        if k == 0:
            return head + c.pick(["ON CONFLICT DO NOTHING", "ON CONFLICT(id) DO NOTHING"])
        sets = []
        for col in ("content", "embedding", "id", "rowid", "touch"):
            if c.int(0, 2) == 0:
                sets.append(
                    {
                        "content": "content = excluded.content",
                        "embedding": "embedding = excluded.embedding",
                        "id": f"id = '{c.pick(IDS)}'",
                        "rowid": f"rowid = {_rowid(c)}",
                        "touch": "accessed_at = accessed_at + 1",
                    }[col]
                )
        sets = sets or ["content = excluded.content"]
        tail = f"ON CONFLICT(id) DO UPDATE SET {', '.join(sets)}"
        if k == 1:
            tail += " ON CONFLICT(rowid) DO NOTHING"
        return head + tail
    if kind == "update":
        sets = []
        for col in ("content", "id", "rowid", "embedding", "touch"):
            if c.int(0, 2) == 0:
                sets.append(
                    {
                        "content": f"content = {_text(c)}",
                        "id": f"id = '{c.pick(IDS)}'",
                        "rowid": c.pick(
                            [
                                f"rowid = {_rowid(c)}",
                                f"rowid = rowid + {c.int(1, 3)}",
                                f"rowid = rowid - {c.int(1, 3)}",
                            ]
                        ),
                        "embedding": f"embedding = {_vec(c)}",
                        "touch": "accessed_at = accessed_at + 1, access_count = access_count + 1",
                    }[col]
                )
        sets = sets or ["accessed_at = accessed_at + 1"]
        return f"UPDATE {c.pick(CONFLICT)}episodes SET {', '.join(sets)} WHERE {_where(c)}"
    return f"DELETE FROM episodes WHERE {_where(c)}"


def random_op(c: Chooser) -> List[str]:
    """A write, or a short transaction of writes that is committed or rolled back."""
    if c.int(0, 9):
        return [random_write(c)]
    return (
        ["BEGIN"] + [random_write(c) for _ in range(c.int(1, 3))] + [c.pick(["COMMIT", "ROLLBACK"])]
    )


def template_episodes() -> List[dict]:
    rng = random.Random(3)
    return [
        dict(
            id=i,
            content=" ".join(rng.choice(WORDS) for _ in range(3)),
            embedding=np.frombuffer(VECS[n % len(VECS)], "<f4") if n % 3 else None,
            created_at=1000 + n,
            accessed_at=1000 + n,
        )  # far from "now": see same_rows
        for n, i in enumerate(IDS[:5])
    ]


# ---------------------------------------------------------------- the controls


@needs_shell
def test_control_the_checks_fail_on_the_schema_before_0004(tmp_path):
    """Under the old schema the issue's shell writes corrupt the index, and both the
    shell harness and check_consistent say so: passing them means something."""
    db = db_before_0004(tmp_path / "old.db", seed_episodes())
    problems = run_shell_writes(
        db, ["INSERT OR REPLACE INTO episodes(id, content) VALUES ('e3', 'totally different text')"]
    )
    assert problems and "malformed" in problems[0], problems
    with pytest.raises(apsw.CorruptError):
        check_consistent(plain(db))

    db2 = db_before_0004(tmp_path / "old2.db", seed_episodes())
    assert run_shell_writes(db2, ["UPDATE episodes SET rowid = 9000 WHERE id = 'e10'"])


def test_control_check_consistent_sees_a_stale_vector_and_a_stale_displaced_row(tmp_path):
    if VEC_PATH is None:
        pytest.skip("sqlite-vec is not installed")
    db = new_store(tmp_path / "k.db", knn=True)
    c = plain(db, vec=True)
    check_consistent(c)
    c.execute("BEGIN")
    c.execute("DROP TRIGGER episodes_vec_delete")
    c.execute("DELETE FROM episodes WHERE id = 'e5'")
    with pytest.raises(AssertionError):
        check_consistent(c)
    c.execute("ROLLBACK")
    c.execute("BEGIN")
    c.execute("INSERT INTO episodes_displaced(rowid, content) VALUES (77, 'x')")
    with pytest.raises(AssertionError, match="not live"):
        check_consistent(c)
    c.execute("ROLLBACK")
    check_consistent(c)


def test_control_check_consistent_sees_narrow_tables_that_drift(tmp_path):
    """Migration 0007's tables: a vector the narrow copy missed, a stale code, a
    code row too many are each caught; a pending (NULL) code is fine."""
    db = new_store(tmp_path / "n.db")
    c = plain(db)
    check_consistent(c)
    assert (
        c.execute("SELECT count(*) FROM episodes_codes WHERE code IS NOT NULL").fetchall()[0][0] > 0
    )  # the Store computed the codes
    for sql in (
        "DELETE FROM episodes_vectors WHERE rowid = (SELECT min(rowid) FROM episodes_vectors)",
        "UPDATE episodes_codes SET code = zeroblob(length(code)) WHERE rowid = "
        "(SELECT min(rowid) FROM episodes_codes)",
        "INSERT INTO episodes_codes(rowid, code) VALUES (999999, NULL)",
    ):
        c.execute("BEGIN")
        # migration 0009's guards refuse the first and the last: drift needs them gone
        c.execute("DROP TRIGGER episodes_vectors_keep")
        c.execute("DROP TRIGGER episodes_codes_reinsert")
        c.execute(sql)
        assert [f for f in check_data(c) if f.repairable], sql  # the product's check too
        with pytest.raises(AssertionError):
            check_consistent(c)
        c.execute("ROLLBACK")
    c.execute("UPDATE episodes_codes SET code = NULL")
    check_consistent(c)


@pytest.mark.parametrize("how", ["maintain", "write"])
def test_store_fills_the_codes_another_client_left_pending(tmp_path, how):
    """A write without the extension leaves the code pending; opening a Store leaves it so
    (an open never writes: the quantized pool scores a pending row exactly), and
    Store.maintain() or the Store's next write computes it, equal to vec_signbits."""
    db = new_store(tmp_path / "p.db")
    c = plain(db)
    c.execute("UPDATE episodes SET embedding = ? WHERE id = 'e3'", (f32([-1.0] * DIM),))
    assert c.execute(
        "SELECT code FROM episodes_codes WHERE rowid = (SELECT rowid FROM episodes WHERE id = 'e3')"
    ).fetchall() == [(None,)]
    c.close()
    s = Store(str(db))
    try:
        assert s.conn.execute(
            "SELECT count(*) FROM episodes_codes WHERE code IS NULL"
        ).fetchall() == [(1,)], "opening the Store wrote the code"
        if how == "maintain":
            assert s.maintain()["codes_filled"] == 1
        else:
            s.add("a new episode", embedding=[1.0] * DIM)
        assert s.conn.execute(
            "SELECT count(*) FROM episodes_codes WHERE code IS NULL"
        ).fetchall() == [(0,)]
        assert s.conn.execute(
            "SELECT count(*) FROM episodes_codes AS c JOIN episodes_vectors AS v USING (rowid) "
            "WHERE c.code IS NOT vec_signbits(v.embedding)"
        ).fetchall() == [(0,)]
        check_consistent(s.conn)
    finally:
        s.close()


# ---------------------------------------------------------------- the cases


@needs_shell
def test_shell_insert_or_replace_leaves_no_old_text(tmp_path):
    """INSERT OR REPLACE in the shell, then MATCH 'vault'."""
    db = new_store(
        tmp_path / "m.db",
        episodes=[
            dict(id="a", content="Production Postgres credentials are kept in Vault"),
            dict(id="b", content="The staging database password rotates every 30 days"),
        ],
    )
    out = shell_ok(
        db,
        "\n".join(
            [
                "PRAGMA recursive_triggers;",
                "INSERT OR REPLACE INTO episodes(id, content) "
                "VALUES ('a', 'totally different text about cats');",
                "SELECT 'vault', count(*) FROM episodes_fts WHERE episodes_fts MATCH 'vault';",
                "SELECT 'cats', e.id FROM episodes_fts JOIN episodes AS e ON e.rowid = episodes_fts.rowid"
                " WHERE episodes_fts MATCH 'cats';",
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
                # REPLACE INTO, and a REPLACE on the rowid of another episode
                "REPLACE INTO episodes(id, content) VALUES ('a', 'dogs now');",
                "INSERT OR REPLACE INTO episodes(rowid, id, content) "
                "SELECT rowid, 'c', 'birds took the rowid' FROM episodes WHERE id = 'b';",
                "SELECT 'password', count(*) FROM episodes_fts WHERE episodes_fts MATCH 'password';",
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
            ]
        ),
    )
    assert out.splitlines() == ["0", "vault|0", "cats|a", "password|0"]
    c = plain(db)
    check_consistent(c)
    assert [r for (r,) in c.execute("SELECT id FROM episodes ORDER BY id")] == ["a", "c"]
    assert match(c, "cats") == set() and len(match(c, "dogs")) == 1


@needs_shell
@needs_vec
def test_knn_replace_then_delete_then_store_add_with_embedding(tmp_path):
    """On a knn database a shell REPLACE of the newest episode
    followed by its DELETE left a vector behind, and every Store.add with an
    embedding then failed (UNIQUE constraint on episodes_vec's primary key)."""
    db = new_store(tmp_path / "k.db", knn=True)
    v = hexlit(f32([1, 2, 3, 4]))
    shell_ok(
        db,
        "\n".join(
            [
                f"INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES ('e19', 'moved', {v});",
                "DELETE FROM episodes WHERE id = 'e19';",
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
            ]
        ),
        vec=True,
    )
    check_consistent(plain(db, vec=True))
    with Store(db) as s:
        for i in range(3):  # the rowids the stale vector used to block
            s.add(f"after the replace {i}", id=f"new{i}", embedding=[1.0, 0.5, i, 2.0])
        n_vec, n_emb = s.conn.execute(
            "SELECT (SELECT count(*) FROM episodes_vec), count(embedding) FROM episodes"
        ).fetchall()[0]
        assert n_vec == n_emb == 22
    check_consistent(plain(db, vec=True))
    # the command line counts what is there
    out = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "knn", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "(22 vectors)" in out.stdout, out.stdout


@needs_shell
@pytest.mark.parametrize("knn", [False, pytest.param(True, marks=needs_vec)])
def test_rowid_update_keeps_the_episode_findable_by_its_words(tmp_path, knn):
    """UPDATE episodes SET rowid = 9000 WHERE id = 'e10'."""
    db = new_store(tmp_path / "r.db", knn=knn)
    out = shell_ok(
        db,
        "\n".join(
            [
                "UPDATE episodes SET rowid = 9000 WHERE id = 'e10';",
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
                "SELECT e.rowid, e.id FROM episodes_fts JOIN episodes AS e ON e.rowid = episodes_fts.rowid"
                " WHERE episodes_fts MATCH 'zebra10';",
            ]
        ),
        vec=knn,
    )
    assert out.splitlines() == ["9000|e10"]
    check_consistent(plain(db, vec=knn))
    with Store(db) as s:
        hits = s.recall("zebra10", limit=1, touch=False)
        assert [(h.id, h.rowid) for h in hits] == [("e10", 9000)]
        if knn:
            e10 = s.get("e10").embedding.astype("<f4").tobytes()
            hits = s.recall(
                "nothing",
                qvec=np.frombuffer(e10, "<f4"),
                pool="knn",
                limit=1,
                touch=False,
                weights=(0, 1, 0, 0),
            )
            assert [h.id for h in hits] == ["e10"]


@needs_shell
def test_first_vector_fixes_the_dimension_whoever_writes(tmp_path):
    """Before rrf_meta held embedding_dim, a 3-d and a 4-d blob both
    landed. Now the first vector fixes the dimension, and a wrong-sized, empty,
    non-float32 or non-blob vector is refused, in the shell and through apsw."""
    db = tmp_path / "d.db"
    Store(db).close()
    c = plain(db)
    assert c.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall() == []
    v3, v4 = hexlit(f32([1, 2, 3])), hexlit(f32([1, 2, 3, 4]))
    out = shell(
        db,
        "\n".join(
            [
                "INSERT INTO episodes(id, content, embedding) VALUES ('empty', 'x', X'');",
                "INSERT INTO episodes(id, content, embedding) VALUES ('odd', 'x', X'0000000000');",
                "INSERT INTO episodes(id, content, embedding) VALUES ('text', 'x', '[1,2,3]');",
                f"INSERT INTO episodes(id, content, embedding) VALUES ('v3', 'x', {v3});",
                f"INSERT INTO episodes(id, content, embedding) VALUES ('v4', 'x', {v4});",
                f"UPDATE episodes SET embedding = {v4} WHERE id = 'v3';",
                "UPDATE episodes SET embedding = X'' WHERE id = 'v3';",
                "SELECT id, length(embedding) FROM episodes;",
                "SELECT value FROM rrf_meta WHERE key = 'embedding_dim';",
            ]
        ),
    )
    errors = re.findall(r"error near line (\d+): (.*)", out.stderr)
    assert [int(n) for n, _ in errors] == [1, 2, 3, 5, 6, 7], out.stderr
    assert all("must be a float32 blob of rrf_meta.embedding_dim values" in m for _, m in errors)
    assert out.stdout.splitlines() == ["v3|12", "3"]
    # apsw, on another fresh database: one statement with a 4-d and a 3-d row is
    # refused whole; then the 4-d one lands and fixes 4
    db2 = tmp_path / "d2.db"
    Store(db2).close()
    c2 = plain(db2)
    with pytest.raises(apsw.ConstraintError, match="embedding_dim"):
        c2.execute(
            "INSERT INTO episodes(id, content, embedding) VALUES ('p', 'x', ?), ('q', 'x', ?)",
            (f32([1, 2, 3, 4]), f32([1, 2, 3])),
        )
    assert c2.execute("SELECT count(*) FROM episodes").fetchall() == [(0,)]
    assert c2.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall() == []
    c2.execute(
        "INSERT INTO episodes(id, content, embedding) VALUES ('p', 'x', ?)", (f32([1, 2, 3, 4]),)
    )
    assert c2.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall() == [(4,)]
    # an explicit OR clause on the writer does not turn the dimension's fixing into a conflict
    for clause in ("OR ABORT", "OR FAIL", "OR ROLLBACK", "OR IGNORE", "OR REPLACE"):
        c2.execute(
            f"INSERT {clause} INTO episodes(id, content, embedding) VALUES (?, 'x', ?)",
            (clause, f32([4, 3, 2, 1])),
        )
    check_consistent(c2)
    # the Store sees the dimension the shell fixed
    with Store(db) as s:
        assert s.dim == 3
        s.add("fits", embedding=[1.0, 0.0, 0.0])
        with pytest.raises(StoreError, match="dimension"):
            s.add("does not", embedding=[1.0, 0.0, 0.0, 0.0])


@needs_shell
def test_trusted_schema_off_in_the_debian_shell(tmp_path):
    """With PRAGMA trusted_schema=OFF the shell could not even read
    the database ("unsafe use of json_valid()"). Now it reads, searches and runs the
    recall statement; a write is refused whole, because SQLite 3.40's FTS5 is not an
    innocuous virtual table, which its triggers need."""
    db = new_store(tmp_path / "t.db")
    (tmp_path / "recall.sql").write_text(read_sql("recall.sql"))
    out = shell(
        db,
        "\n".join(
            [
                "PRAGMA trusted_schema = OFF;",
                "SELECT count(*) FROM episodes;",
                "SELECT e.id FROM episodes_fts JOIN episodes AS e ON e.rowid = episodes_fts.rowid"
                " WHERE episodes_fts MATCH 'zebra7';",
                ".param init",
                ".param set :query 'zebra7 episode'",
                ".param set :limit 2",
                ".mode list",
                f".read {tmp_path / 'recall.sql'}",
                ".mode list",
                "INSERT INTO episodes(id, content) VALUES ('new', 'refused');",
                "UPDATE episodes SET content = 'refused' WHERE id = 'e1';",
                "DELETE FROM episodes WHERE id = 'e2';",
                "SELECT count(*), sum(content = 'refused') FROM episodes;",
            ]
        ),
        rrf=True,
    )
    lines = out.stdout.splitlines()
    assert lines[:2] == ["20", "e7"], out.stdout + out.stderr
    assert lines[2].split("|")[0] == "e7", lines  # the recall statement's best hit
    assert lines[-1] == "20|0"
    errors = re.findall(r"error near line \d+: (.*)", out.stderr)
    assert len(errors) == 3 and all(
        'unsafe use of virtual table "episodes_fts"' in e for e in errors
    ), out.stderr
    check_consistent(plain(db))
    # the old schema could not be read at all: the control
    old = db_before_0004(tmp_path / "old.db", seed_episodes())
    out = shell(old, "PRAGMA trusted_schema = OFF;\nSELECT count(*) FROM episodes;")
    assert "unsafe use of json_valid()" in out.stderr


def test_trusted_schema_off_through_apsw_reads_and_writes(tmp_path):
    """The SQLite apsw bundles marks FTS5 (and the JSON functions) innocuous, so
    there a trusted_schema=OFF connection writes too, and the index stays right."""
    db = new_store(tmp_path / "t.db")
    c = plain(db)
    c.execute("PRAGMA trusted_schema = OFF")
    c.execute(
        "INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES ('e1', 'cat', ?)",
        (f32([1, 2, 3, 4]),),
    )
    c.execute("UPDATE episodes SET rowid = 500 WHERE id = 'e2'")
    c.execute("DELETE FROM episodes WHERE id = 'e3'")
    check_consistent(c)
    assert c.execute("SELECT count(*) FROM episodes").fetchall() == [(19,)]


# ---------------------------------------------------------------- knn without sqlite-vec


@needs_shell
@needs_vec
def test_without_sqlite_vec_a_write_to_a_knn_database_is_refused_whole(tmp_path):
    db = new_store(tmp_path / "k.db", knn=True)
    before = dump(plain(db, vec=True))
    writes = [
        "INSERT INTO episodes(id, content) VALUES ('x', 'no vector even')",
        "INSERT OR REPLACE INTO episodes(id, content, embedding) "
        f"VALUES ('e1', 'y', {hexlit(f32([1, 2, 3, 4]))})",
        "UPDATE episodes SET content = 'changed' WHERE id = 'e2'",
        "UPDATE episodes SET accessed_at = 5 WHERE id = 'e2'",
        "DELETE FROM episodes WHERE id = 'e3'",
    ]
    out = shell(db, "\n".join(w + ";" for w in writes + ["SELECT count(*) FROM episodes"]))
    errors = re.findall(r"error near line (\d+): (.*)", out.stderr)
    assert [int(n) for n, _ in errors] == [1, 2, 3, 4, 5], out.stderr
    assert all("no such module: vec0" in m for _, m in errors), out.stderr
    assert out.stdout.splitlines() == ["20"]
    c = plain(db)  # apsw without sqlite-vec: the same
    for w in writes:
        with pytest.raises(apsw.SQLError, match="no such module: vec0"):
            c.execute(w)
    c.close()
    c = plain(db, vec=True)
    assert dump(c) == before
    check_consistent(c)


# ---------------------------------------------------------------- every kind of write

TEMPLATE_DIR = Path("/nonexistent")  # set by the module fixture below


@pytest.fixture(scope="module", autouse=True)
def _template_dir(tmp_path_factory):
    global TEMPLATE_DIR
    TEMPLATE_DIR = tmp_path_factory.mktemp("templates")
    yield


def _template(knn: bool) -> Path:
    """A Store database with episodes a..e (rowids 1..5; b, c and e with vectors), made
    once per module."""
    path = TEMPLATE_DIR / f"template-{int(knn)}.db"
    if not path.exists():
        new_store(path, knn=knn, episodes=template_episodes())
        with Store(path) as st:  # migration 0008: b and c in a block of 2, e loose
            assert st.pack_codes(block=2) == 2
        c = apsw.Connection(str(path))
        c.execute("PRAGMA journal_mode = DELETE")
        c.close()
    return path


def _copy_template(path: Path, knn: bool, recursive: bool = False) -> apsw.Connection:
    """An in-memory copy of ``path``, opened as :func:`plain` does."""
    mem = plain(":memory:", vec=knn, recursive=recursive)
    src = apsw.Connection(str(path))
    with mem.backup("main", src, "main") as b:
        b.step()
    src.close()
    return mem


# (statement, whether it must succeed). The template has episodes a..e at rowids 1..5.
V1, V2 = hexlit(VECS[0]), hexlit(VECS[2])
EVERY_WRITE: List[Tuple[str, bool]] = [
    (f"INSERT INTO episodes(id, content, embedding) VALUES ('n', 'cat dog', {V1})", True),
    ("INSERT INTO episodes(id, content) VALUES ('n1', 'cat'), ('n2', 'dog'), ('n3', 'fish')", True),
    (
        f"INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES ('a', 'vault tree', {V1})",
        True,
    ),
    ("INSERT OR REPLACE INTO episodes(id, content) VALUES ('e', 'no vector now')", True),
    (
        f"INSERT OR REPLACE INTO episodes(rowid, id, content, embedding) "
        f"VALUES (2, 'z', 'tree', {V2})",
        True,
    ),
    ("INSERT OR REPLACE INTO episodes(rowid, id, content) VALUES (2, 'c', 'two rows go')", True),
    (
        "INSERT OR REPLACE INTO episodes(rowid, id, content) VALUES (3, 'c', 'same row, new text')",
        True,
    ),
    ("REPLACE INTO episodes(id, content) VALUES ('b', 'bird')", True),
    (
        "INSERT OR REPLACE INTO episodes(id, content) "
        "VALUES ('a', 'one'), ('a', 'two'), ('b', 'three')",
        True,
    ),
    (
        "INSERT OR REPLACE INTO episodes(id, content, embedding) "
        "SELECT id, content || ' fish', embedding FROM episodes WHERE rowid % 2 = 1",
        True,
    ),
    ("INSERT OR REPLACE INTO episodes(rowid, id, content) VALUES (-1, 'neg', 'cat')", True),
    (
        "INSERT OR IGNORE INTO episodes(id, content) VALUES ('a', 'ignored'), ('n', 'kept fish')",
        True,
    ),
    ("INSERT OR IGNORE INTO episodes(rowid, id, content) VALUES (1, 'n', 'ignored')", True),
    (
        "INSERT OR FAIL INTO episodes(id, content) "
        "VALUES ('n', 'kept'), ('a', 'fails'), ('m', 'never')",
        False,
    ),
    ("INSERT OR ABORT INTO episodes(id, content) VALUES ('n', 'undone'), ('a', 'fails')", False),
    ("INSERT OR ROLLBACK INTO episodes(id, content) VALUES ('a', 'fails')", False),
    ("INSERT INTO episodes(id, content) VALUES ('a', 'fails')", False),
    (
        "INSERT INTO episodes(id, content) VALUES ('a', 'upserted dog') "
        "ON CONFLICT(id) DO UPDATE SET content = excluded.content",
        True,
    ),
    (
        f"INSERT INTO episodes(id, content, embedding) VALUES ('b', 'x', {V2}) "
        "ON CONFLICT(id) DO UPDATE SET embedding = excluded.embedding",
        True,
    ),
    (
        "INSERT INTO episodes(id, content) VALUES ('c', 'x') "
        "ON CONFLICT(id) DO UPDATE SET id = 'c2', content = 'renamed fish'",
        True,
    ),
    (
        "INSERT INTO episodes(id, content) VALUES ('c', 'x') "
        "ON CONFLICT(id) DO UPDATE SET rowid = 40",
        True,
    ),
    (
        "INSERT INTO episodes(id, content) VALUES ('d', 'x') "
        "ON CONFLICT(id) DO UPDATE SET accessed_at = accessed_at + 1",
        True,
    ),
    ("INSERT INTO episodes(id, content) VALUES ('d', 'x') ON CONFLICT DO NOTHING", True),
    (
        "INSERT INTO episodes(rowid, id, content) VALUES (1, 'zz', 'x') "
        "ON CONFLICT(id) DO UPDATE SET content = 'no' ON CONFLICT(rowid) DO NOTHING",
        True,
    ),
    ("UPDATE episodes SET content = 'dog dog' WHERE id = 'a'", True),
    ("UPDATE episodes SET id = 'a2' WHERE id = 'a'", True),
    ("UPDATE episodes SET rowid = 9000 WHERE id = 'b'", True),
    ("UPDATE episodes SET rowid = rowid + 100", True),
    ("UPDATE episodes SET rowid = 2 WHERE id = 'a'", False),
    ("UPDATE OR REPLACE episodes SET rowid = 2 WHERE id = 'a'", True),
    ("UPDATE OR REPLACE episodes SET id = 'b' WHERE id = 'a'", True),
    ("UPDATE OR REPLACE episodes SET id = 'c', rowid = 2 WHERE id = 'a'", True),
    ("UPDATE OR REPLACE episodes SET rowid = rowid + 1", True),
    ("UPDATE OR REPLACE episodes SET id = 'a'", True),
    ("UPDATE OR IGNORE episodes SET rowid = 2 WHERE id = 'a'", True),
    ("UPDATE OR IGNORE episodes SET id = 'b', content = 'ignored' WHERE id = 'a'", True),
    (f"UPDATE episodes SET embedding = {V2} WHERE rowid <= 3", True),
    ("UPDATE episodes SET embedding = NULL WHERE id = 'b'", True),
    (
        f"UPDATE episodes SET embedding = {V1}, rowid = 77, content = 'all three' WHERE id = 'c'",
        True,
    ),
    ("UPDATE episodes SET accessed_at = 1, access_count = access_count + 1", True),
    ("UPDATE episodes SET content = content WHERE 1", True),
    ("DELETE FROM episodes WHERE id = 'a'", True),
    ("DELETE FROM episodes WHERE rowid > 2", True),
    ("DELETE FROM episodes", True),
]


@pytest.mark.parametrize("recursive", [False, True], ids=["recursive_off", "recursive_on"])
@pytest.mark.parametrize("knn", [False, pytest.param(True, marks=needs_vec)], ids=["fts", "knn"])
@pytest.mark.parametrize("sql, ok", EVERY_WRITE, ids=[s[:60] for s, _ in EVERY_WRITE])
def test_every_kind_of_write_keeps_the_indexes_right(sql, ok, knn, recursive):
    c = _copy_template(_template(knn), knn, recursive)
    ref = _copy_template(_template(knn), knn, recursive)
    without_index_triggers(ref)
    check_consistent(c)
    before = dump(c)
    result = outcome(c, sql)
    assert (result == "ok") is ok, result
    assert result == outcome(ref, sql) and same_rows(c) == same_rows(ref)
    check_consistent(c)
    if (
        ok
        and not sql.startswith(("INSERT OR IGNORE", "UPDATE OR IGNORE"))
        and "DO NOTHING" not in sql
        and "content = content" not in sql
        and "accessed_at" not in sql
    ):
        assert dump(c) != before, "the write changed nothing: the case tests nothing"
    if not ok and "OR FAIL" not in sql:
        assert dump(c) == before
    # and the store is usable afterwards: a new episode with a vector
    c.execute(
        "INSERT INTO episodes(id, content, embedding) VALUES ('after', 'tree', ?)", (VECS[1],)
    )
    check_consistent(c)


def test_the_displaced_rows_are_cleared_after_each_write():
    c = _copy_template(_template(False), False)
    c.execute("INSERT OR REPLACE INTO episodes(id, content) VALUES ('a', 'x'), ('b', 'y')")
    assert c.execute("SELECT count(*) FROM episodes_displaced").fetchall() == [(0,)]
    # an ignored write leaves a copy of the live row it collided with; the next write clears it
    c.execute("INSERT OR IGNORE INTO episodes(id, content) VALUES ('c', 'ignored')")
    assert c.execute(
        "SELECT d.content = e.content FROM episodes_displaced AS d JOIN episodes AS e USING (rowid)"
    ).fetchall() == [(1,)]
    c.execute("INSERT INTO episodes(id, content) VALUES ('new', 'cat')")
    assert c.execute("SELECT count(*) FROM episodes_displaced").fetchall() == [(0,)]
    check_consistent(c)


# ---------------------------------------------------------------- random sequences


@needs_shell
@pytest.mark.parametrize("knn", [False, pytest.param(True, marks=needs_vec)], ids=["fts", "knn"])
def test_random_writes_through_the_shell(tmp_path, knn):
    """A seeded random sequence of 400 writes of every kind in one shell session,
    FTS5's integrity-check after each; then the full check and Store writes."""
    db = new_store(tmp_path / "s.db", knn=knn, episodes=template_episodes())
    rng = random.Random(20240611 + knn)
    statements: List[str] = []
    while len(statements) < 400:
        statements.extend(random_op(Chooser(rng)))
    ref = tmp_path / "ref.db"
    shutil.copy(db, ref)
    without_index_triggers(plain(ref, vec=knn))
    errors, problems = shell_session(db, statements, vec=knn)
    assert problems == []
    # the same statements on the same table without the index triggers: the same
    # refusals and the same rows
    ref_errors, ref_problems = shell_session(ref, statements, vec=knn, check=False)
    assert ref_problems == []
    assert errors == ref_errors
    assert 30 < len(errors) < 300, "the sequence mixes writes that land and refusals"
    c = plain(db, vec=knn)
    assert same_rows(c) == same_rows(plain(ref, vec=knn))
    check_consistent(c)
    for kind in (
        "INSERT INTO",
        "INSERT OR REPLACE",
        "INSERT OR IGNORE",
        "INSERT OR FAIL",
        "REPLACE INTO",
        "ON CONFLICT(id) DO UPDATE",
        "DO NOTHING",
        "UPDATE episodes",
        "UPDATE OR REPLACE",
        "SET rowid",
        "SET id",
        "DELETE",
        "SELECT id",
        "ROLLBACK",
    ):
        assert any(kind in s for s in statements), kind
    with Store(db) as s:
        s.add("store after the shell", id="store1", embedding=[1.0, 2.0, 3.0, 4.0])
        s.upsert("store upsert cat", id="store1", embedding=[4.0, 3.0, 2.0, 1.0])
        s.delete("a")
    check_consistent(plain(db, vec=knn))


@pytest.mark.parametrize("recursive", [False, True], ids=["recursive_off", "recursive_on"])
@pytest.mark.parametrize("knn", [False, pytest.param(True, marks=needs_vec)], ids=["fts", "knn"])
def test_random_writes_through_apsw(knn, recursive):
    """Hypothesis: random sequences of writes of every kind (and transactions that
    commit or roll back); after each statement the indexes are right."""
    template = _template(knn)

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.data())
    def run(data):
        c = _copy_template(template, knn, recursive)
        ref = _copy_template(template, knn, recursive)
        without_index_triggers(ref)
        chooser = Chooser(data=data)
        for _ in range(data.draw(st.integers(1, 25))):
            for sql in random_op(chooser):
                # the write does to episodes what it does to a table without the
                # index triggers: same success or error, same rows
                assert outcome(c, sql) == outcome(ref, sql), sql
                assert same_rows(c) == same_rows(ref), sql
                check_consistent(c)
        c.close()
        ref.close()

    run()


# ---------------------------------------------------------------- the migration repairs


@needs_shell
def test_migration_repairs_fts_drift_and_keeps_every_row(tmp_path):
    db = db_before_0004(tmp_path / "m.db", seed_episodes(every=2))
    shell(
        db,
        "\n".join(
            [
                "INSERT OR REPLACE INTO episodes(id, content) VALUES ('e3', 'vault moved to cats');",
                "UPDATE episodes SET rowid = 9000 WHERE id = 'e10';",
                "UPDATE episodes SET metadata = '{\"k\": [1, 2]}' WHERE id = 'e4';",
                "UPDATE episodes SET strength = 0.5, kind = 'fact', importance = 'high' WHERE id = 'e5';",
            ]
        ),
    )
    c = plain(db)
    with pytest.raises(apsw.CorruptError):
        fts_integrity(c)
    before = same_rows(c)
    c.close()
    with Store(db):
        pass
    c = plain(db)
    assert current_version(c) == max(m.version for m in available())
    assert same_rows(c) == before, "every rowid and value survives the table's rebuild"
    check_consistent(c)
    assert match(c, "zebra3") == set()
    assert match(c, "zebra10") == {9000}
    # only innocuous built-in functions are left in the schema
    schema = " ".join(s for (s,) in c.execute("SELECT sql FROM sqlite_master WHERE sql NOT NULL"))
    assert "json_valid" not in schema
    assert c.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall() == [
        (DIM,)
    ]
    idx = c.execute("EXPLAIN QUERY PLAN SELECT rowid FROM episodes WHERE id = 'e1'").fetchall()
    assert any("USING" in r[3] and "INDEX" in r[3] for r in idx), idx


def test_migration_fixes_the_dimension_only_when_the_vectors_agree(tmp_path):
    ok = db_before_0004(tmp_path / "ok.db", seed_episodes(every=3))
    mixed = db_before_0004(tmp_path / "mixed.db", seed_episodes())
    for path in (ok, mixed):
        c = plain(path)
        c.execute("DELETE FROM rrf_meta WHERE key = 'embedding_dim'")
        if path == mixed:
            c.execute(
                "INSERT INTO episodes(id, content, embedding) VALUES ('v3', 'x', ?)",
                (f32([1, 2, 3]),),
            )
        c.close()
        migrate(plain(path))
    assert plain(ok).execute(
        "SELECT value FROM rrf_meta WHERE key = 'embedding_dim'"
    ).fetchall() == [(DIM,)]
    assert (
        plain(mixed).execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall()
        == []
    )


@needs_shell
@needs_vec
def test_migration_repairs_a_knn_index_the_old_triggers_let_drift(tmp_path):
    """The issue's knn case on the old schema (the control), then the migration."""
    db = db_before_0004(tmp_path / "k.db", seed_episodes(), knn=True)  # e0..e19: rowids 1..20
    v = hexlit(f32([1, 2, 3, 4]))
    # the newest episode replaced, then deleted: its vector stays at rowid 20
    shell_ok(
        db,
        "\n".join(
            [
                f"INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES ('e19', 'x', {v});",
                "DELETE FROM episodes WHERE id = 'e19';",
            ]
        ),
        vec=True,
    )
    c = plain(db, vec=True)
    for _ in range(2):  # every add with a vector takes rowid 20 and fails, every retry
        with pytest.raises(apsw.SQLError, match="episodes_vec primary key"):
            c.execute(
                "INSERT INTO episodes(id, content, embedding) VALUES ('blocked', 'x', ?)",
                (f32([1, 1, 1, 1]),),
            )
    # a rowid change leaves the vector at the old rowid and none at the new one, and a
    # vector-less episode that takes the old rowid inherits e10's vector
    shell_ok(db, "UPDATE episodes SET rowid = 9000 WHERE id = 'e10';", vec=True)
    c.execute("INSERT INTO episodes(rowid, id, content) VALUES (11, 'heir', 'no vector')")
    vec = dict(c.execute("SELECT rowid, embedding FROM episodes_vec"))
    emb = dict(c.execute("SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL"))
    assert set(vec) - set(emb) == {11, 20} and set(emb) - set(vec) == {9000}
    before = same_rows(c)
    c.close()
    with Store(db) as s:
        s.add("now it lands", id="lands", embedding=[1.0, 1.0, 1.0, 1.0])
    c = plain(db, vec=True)
    check_consistent(c)
    assert same_rows(c)[:-1] == before
    # and the new triggers are the ones in force
    c.execute("UPDATE episodes SET rowid = 9500 WHERE id = 'e12'")
    c.execute("INSERT OR REPLACE INTO episodes(id, content) VALUES ('e14', 'no vector now')")
    check_consistent(c)


@needs_vec
def test_a_knn_database_is_not_migrated_without_sqlite_vec(tmp_path):
    db = db_before_0004(tmp_path / "k.db", seed_episodes(), knn=True)
    c = plain(db)  # no sqlite-vec
    before = same_rows(c)
    with pytest.raises(MigrationError, match="sqlite-vec"):
        migrate(c)
    assert current_version(c) == 3
    assert same_rows(c) == before
    assert {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")} >= {
        "episodes_vec_insert",
        "episodes_vec_delete",
        "episodes_vec_update",
    }
    c.close()
    # with sqlite-vec the same database migrates, and the knn part's larger page cache
    # is given back
    c = plain(db, vec=True)
    c.execute("PRAGMA cache_size = -3000")
    migrate(c)
    assert c.execute("PRAGMA cache_size").fetchall() == [(-3000,)]
    check_consistent(c)


def test_a_fresh_database_gets_the_same_schema_as_a_migrated_one(tmp_path):
    fresh = plain(new_store(tmp_path / "fresh.db"))
    old = db_before_0004(tmp_path / "old.db", seed_episodes())
    migrate(plain(old))
    migrated = plain(old)

    def schema(c):
        return sorted(
            c.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            ).fetchall()
        )

    assert schema(fresh) == schema(migrated)


def test_migration_keeps_views_and_refuses_to_drop_indexes_or_triggers_of_your_own(tmp_path):
    db = db_before_0004(tmp_path / "v.db", seed_episodes())
    c = plain(db)
    c.execute("CREATE VIEW recent_ids AS SELECT id FROM episodes ORDER BY accessed_at DESC, rowid")
    c.execute("CREATE INDEX my_kind ON episodes(kind)")
    before = same_rows(c)
    with pytest.raises(apsw.ConstraintError, match="indexes or triggers of your own"):
        migrate(c)
    assert current_version(c) == 3 and same_rows(c) == before
    assert c.execute("SELECT name FROM sqlite_master WHERE name = 'my_kind'").fetchall()
    c.execute("DROP INDEX my_kind")
    migrate(c)
    assert len(c.execute("SELECT * FROM recent_ids").fetchall()) == 20
    assert c.execute("PRAGMA legacy_alter_table").fetchall() == [(0,)]
    check_consistent(c)


@pytest.mark.parametrize("recursive", [False, True], ids=["recursive_off", "recursive_on"])
def test_content_of_any_type_is_indexed_and_unindexed_alike(recursive):
    """A client may store a BLOB or a number as content (TEXT affinity keeps a BLOB);
    the displaced row keeps the value as FTS5 indexed it."""
    c = _copy_template(_template(False), False, recursive)
    for sql in [
        "INSERT INTO episodes(id, content) VALUES ('blob', X'6361742074726565')",
        "INSERT INTO episodes(id, content) VALUES ('num', 12345)",
        "INSERT OR REPLACE INTO episodes(id, content) VALUES ('blob', X'646F67')",
        "INSERT OR REPLACE INTO episodes(rowid, id, content) "
        "SELECT rowid, 'num2', X'66697368' FROM episodes WHERE id = 'num'",
        "UPDATE episodes SET rowid = 700 WHERE id = 'blob'",
        "UPDATE OR REPLACE episodes SET id = 'num2' WHERE id = 'a'",
        "DELETE FROM episodes WHERE typeof(content) = 'blob'",
    ]:
        c.execute(sql)
        check_consistent(c)
    assert c.execute("SELECT count(*) FROM episodes WHERE typeof(content) = 'blob'").fetchall() == [
        (0,)
    ]


# ---------------------------------------------------------------- the writer's OR clause


@needs_shell
def test_external_content_fts5_ignores_the_writers_or_replace():
    """SQLite hands the writer's OR clause to the statements inside the triggers, so
    under INSERT / UPDATE OR REPLACE the triggers' ``INSERT INTO episodes_fts(rowid,
    content)`` runs as OR REPLACE. An FTS5 table over a content table would then first
    delete the rowid's entry by reading the content table (already the new text) and
    remove words that were never indexed. It does not: FTS5 honours the conflict mode
    only for a table that stores its own content, in SQLite 3.40 (the shell) and in
    the SQLite apsw bundles alike. The triggers rely on it; this pins it. The control:
    the same steps on an FTS5 table with its own content do go through REPLACE."""
    steps = (
        "CREATE TABLE t(x);"
        "CREATE VIRTUAL TABLE f USING fts5(x, content='t');"
        "INSERT INTO t(rowid, x) VALUES (1, 'a b');"
        "INSERT INTO f(rowid, x) VALUES (1, 'a b');"
        "INSERT INTO f(f, rowid, x) VALUES ('delete', 1, 'a b');"
        "UPDATE t SET x = 'c d';"
        "INSERT OR REPLACE INTO f(rowid, x) VALUES (1, 'c d');"
        "INSERT INTO f(f, rank) VALUES ('integrity-check', 1);"
        "SELECT rowid FROM f WHERE f MATCH 'c';"
    )
    out = subprocess.run(
        [SHELL, "-batch", ":memory:", steps], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and not out.stderr and out.stdout.split() == ["1"], out
    c = apsw.Connection(":memory:")
    assert [r for (r,) in c.execute(steps)] == [1]
    # control: with its own content, OR REPLACE replaces (a plain INSERT would fail)
    for run in (
        lambda sql: (
            subprocess.run(
                [SHELL, "-batch", ":memory:", sql], capture_output=True, text=True, timeout=60
            ).stdout
        ),
        lambda sql: "\n".join(str(r) for (r,) in apsw.Connection(":memory:").execute(sql)),
    ):
        assert run(
            "CREATE VIRTUAL TABLE g USING fts5(x);"
            "INSERT INTO g(rowid, x) VALUES (1, 'a b');"
            "INSERT OR REPLACE INTO g(rowid, x) VALUES (1, 'c d');"
            "SELECT count(*) FROM g WHERE g MATCH 'a OR c';"
        ).split() == ["1"]


#: writes that collide with other rows on the rowid, the id or both (the template has
#: episodes a..e at rowids 1..5; b, c and e have vectors), each run under every OR
#: clause. The first is the churn soak's ``UPDATE OR REPLACE episodes SET rowid = 2837
#: WHERE id = 's88'`` in small.
OR_CLAUSES = ("", "OR REPLACE ", "OR IGNORE ", "OR FAIL ", "OR ABORT ", "OR ROLLBACK ")
COLLIDING_WRITES = (
    "UPDATE {c}episodes SET rowid = 2 WHERE id = 'a'",
    "UPDATE {c}episodes SET rowid = 3 WHERE id = 'b'",
    "UPDATE {c}episodes SET id = 'b' WHERE id = 'a'",
    "UPDATE {c}episodes SET content = 'cat fish' WHERE id = 'a'",
    "UPDATE {c}episodes SET rowid = 2, content = 'moved cat' WHERE id = 'a'",
    "UPDATE {c}episodes SET id = 'c', rowid = 2 WHERE id = 'a'",
    "UPDATE {c}episodes SET id = 'b', content = 'renamed tree' WHERE id = 'c'",
    f"UPDATE {{c}}episodes SET rowid = 3, embedding = {V1} WHERE id = 'a'",
    "UPDATE {c}episodes SET rowid = rowid + 1",
    "UPDATE {c}episodes SET rowid = 6 - rowid WHERE rowid IN (1, 5)",
    "INSERT {c}INTO episodes(rowid, id, content) VALUES (2, 'n', 'tree cat')",
    "INSERT {c}INTO episodes(id, content) VALUES ('b', 'tree cat')",
    "INSERT {c}INTO episodes(rowid, id, content) VALUES (2, 'c', 'two rows go')",
    "INSERT {c}INTO episodes(rowid, id, content) VALUES (3, 'c', 'same row new text')",
    f"INSERT {{c}}INTO episodes(rowid, id, content, embedding) VALUES (1, 'n', 'vault', {V2})",
    "INSERT {c}INTO episodes(rowid, id, content) "
    "SELECT rowid, id || 'x', content || ' dog' FROM episodes",
    "INSERT {c}INTO episodes(id, content) VALUES ('n', 'kept bird'), ('a', 'collides')",
    "INSERT {c}INTO episodes(id, content) VALUES ('a', 'x') "
    "ON CONFLICT(id) DO UPDATE SET rowid = 2",
)
COLLISION_CASES = [w.format(c=c) for w in COLLIDING_WRITES for c in OR_CLAUSES] + [
    "REPLACE INTO episodes(rowid, id, content) VALUES (2, 'n', 'tree cat')",
    "REPLACE INTO episodes(rowid, id, content) VALUES (2, 'c', 'two rows go')",
    "REPLACE INTO episodes(id, content) VALUES ('b', 'bird')",
]


@needs_shell
@pytest.mark.parametrize("knn", [False, pytest.param(True, marks=needs_vec)], ids=["fts", "knn"])
@pytest.mark.parametrize("sql", COLLISION_CASES, ids=[s[:70] for s in COLLISION_CASES])
def test_colliding_writes_under_every_or_clause_in_the_shell_and_apsw(tmp_path, sql, knn):
    """Each colliding write, under each OR clause, through the Debian 3.40 shell and
    through apsw (each with FTS5's integrity-check after it): both clients meet the
    same refusal (or none) as a table without the index triggers, leave the same rows,
    and leave the indexes right."""
    template = _template(knn)
    # the reference: the same write on the same table without the index triggers
    ref = _copy_template(template, knn)
    without_index_triggers(ref)
    want = outcome(ref, sql)
    # apsw (SQLite 3.54)
    c = _copy_template(template, knn)
    assert outcome(c, sql) == want
    fts_integrity(c)
    check_consistent(c)
    assert same_rows(c) == same_rows(ref)
    # the shell (SQLite 3.40), on a file copy of the same template
    db = tmp_path / "shell.db"
    shutil.copy(template, db)
    errors, problems = shell_session(db, [sql], vec=knn)
    assert problems == []
    assert (0 in errors) == (want != "ok"), (errors, want)
    if want != "ok":
        assert want.split(": ", 1)[1] in errors[0]
    s = plain(db, vec=knn)
    assert same_rows(s) == same_rows(ref)
    check_consistent(s)
    # a later ordinary write from either client is still right
    shell_ok(
        db,
        "INSERT INTO episodes(id, content) VALUES ('later', 'cat tree');\n"
        "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
        vec=knn,
    )
    s.execute(
        "INSERT INTO episodes(id, content, embedding) VALUES ('after', 'tree', ?)", (VECS[1],)
    )
    check_consistent(s)
