"""Loading the extension: what it registers, where it loads, what it links
(docs/contract.md "The extension"; csrc/rrf.c).

- the exact pragma_function_list rows that loading adds, with their flags, and the list
  of them in csrc/rrf.c's header comment;
- Debian's sqlite3 shell loading it with `.load` and running a fused hybrid query;
- the shared object exports only sqlite3_rrf_init and needs no Python;
- rrf_version(), rrf_debug(), and the Python loader (loadable_path, load).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import apsw
import numpy as np
import pytest

import sqlite_rrf
from sqlite_rrf.core import kernels

SO_SUFFIX = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")
SO_PATH = sqlite_rrf.loadable_path() + SO_SUFFIX

EXPECTED = {
    # (name, narg): type ('s' scalar, 'a' aggregate, 'w' aggregate usable as a window function)
    ("vec_cosine", 2): "s",
    ("vec_signbits", 1): "s",
    ("rrf_hamming", 2): "s",
    ("rrf_topk", 3): "a",
    ("rrf_hamming_topk", 4): "a",
    ("rrf_fold", 12): "a",
    ("rrf_sum", -1): "s",
    ("fts5_query", 1): "s",
    ("fts5_query", 2): "s",
    ("fts5_query", 3): "s",
    ("fts5_query", 4): "s",
    ("rrf_version", 0): "s",
    ("rrf_debug", 0): "s",
    ("rrf_fuse", 1): "w",
    ("rrf_fuse", 2): "w",
    ("rrf_fuse", 3): "w",
    ("rrf_explain", 2): "w",
    ("rrf_explain", 3): "w",
    ("rrf_explain", 4): "w",
    # the FTS5 auxiliary functions: FTS5 overloads each name as a SQL function (any narg)
    ("rrf_bm25", -1): "s",
    ("rrf_bm25_or", -1): "s",
    ("rrf_bm25_or_top", -1): "s",
    ("rrf_bm25_idf", -1): "s",
}

FUNCLIST_SQL = "SELECT name, builtin, type, enc, narg, flags FROM pragma_function_list"


def function_rows(conn):
    return set(conn.execute(FUNCLIST_SQL).fetchall())


# ---------------------------------------------------------------- what loading registers


def test_pragma_function_list_diff_is_exactly_the_contract():
    c = apsw.Connection(":memory:")
    before = function_rows(c)
    sqlite_rrf.load(c)
    after = function_rows(c)
    assert before <= after  # nothing removed or changed
    added = after - before
    assert {(name, narg) for (name, _b, _t, _e, narg, _f) in added} == set(EXPECTED)
    assert len(added) == len(EXPECTED)  # one row per (name, narg)
    for name, builtin, type_, enc, narg, _flags in added:
        assert builtin == 0
        assert enc == "utf8"
        assert type_ == EXPECTED[(name, narg)], name


RRF_C = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc", "rrf.c")
#: the group headings of csrc/rrf.c's list: pragma_function_list's type ('x': FTS5 auxiliary)
HEADER_GROUPS = {
    "scalar functions": "s",
    "window functions": "w",
    "aggregates": "a",
    "FTS5 auxiliary functions": "x",
}


def header_functions(source: str) -> dict:
    """{(name, narg): (type, heading)} of the list in the header comment of csrc/rrf.c:
    a heading line per kind ('** scalar functions (flags):'), then one line per function,
    '**   name(signature)   files'. An FTS5 auxiliary function, or a signature with '...',
    takes any number of arguments (narg -1); otherwise each arity from the required
    arguments to all of them ('[, x]' is optional)."""
    comment = source[source.index("/*") : source.index("*/")]
    out, group, heading = {}, None, ""
    for line in comment.splitlines():
        body = line[2:] if line.startswith("**") else line
        head = re.match(r" (" + "|".join(HEADER_GROUPS) + r")\b", body)
        if head:
            group, heading = HEADER_GROUPS[head.group(1)], body
            continue
        m = re.match(r"   (\w+)\(([^)]*)\)", body)
        if not m:
            continue
        assert group, f"a function before any heading: {line!r}"
        name, args = m.groups()
        if group == "x" or "..." in args:
            nargs = [-1]
        else:
            required = len(re.findall(r"\w+", args.split("[", 1)[0]))
            nargs = list(range(required, len(re.findall(r"\w+", args)) + 1))
        for n in nargs:
            assert (name, n) not in out, f"listed twice: {name}"
            out[(name, n)] = (group, heading)
    return out


def test_the_header_comment_of_rrf_c_lists_what_is_registered():
    """The list in csrc/rrf.c's header comment is what loading adds to pragma_function_list:
    the same (name, narg) rows, each under the heading of its type, whose flags are the
    ones the heading names. A stale list (a function renamed, added or dropped) fails."""
    if not os.path.exists(RRF_C):
        pytest.skip("no csrc/ next to the tests (an installed wheel's test run)")
    with open(RRF_C, encoding="utf-8") as f:
        source = f.read()
    listed = header_functions(source)
    c = apsw.Connection(":memory:")
    before = function_rows(c)
    sqlite_rrf.load(c)
    added = {
        (name, narg): (type_, flags)
        for name, _b, type_, _e, narg, flags in function_rows(c) - before
    }
    assert set(listed) == set(added)
    for key, (group, heading) in listed.items():
        type_, flags = added[key]
        if group == "x":  # FTS5 overloads the name as a SQL function
            assert type_ == "s", key
            continue
        assert type_ == group, key
        assert bool(flags & apsw.SQLITE_DETERMINISTIC) == ("SQLITE_DETERMINISTIC" in heading), key
        assert bool(flags & apsw.SQLITE_INNOCUOUS) == ("SQLITE_INNOCUOUS" in heading), key
    # the check can fail: a list that misses a function, or names one that is not registered
    for stale in (
        source.replace("**   rrf_hamming_topk(", "**   rrf_hamming_top("),
        source.replace("**   rrf_bm25_idf(", "** no longer rrf_bm25_idf("),
    ):
        assert set(header_functions(stale)) != set(added)


def test_flags_scalars_deterministic_innocuous_aggregates_innocuous():
    """Compare with reference functions registered through apsw with the flags the
    design names, and check the bits themselves."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    det, inn = apsw.SQLITE_DETERMINISTIC, apsw.SQLITE_INNOCUOUS

    class Win:
        def step(self, *a):
            pass

        def inverse(self, *a):
            pass

        def value(self):
            return None

        def final(self):
            return None

    c.create_scalar_function(
        "ref_scalar", lambda a, b: None, 2, flags=det | inn
    )  # apsw adds SQLITE_UTF8
    c.create_window_function("ref_window", Win, 2, flags=inn)
    ref = {
        name: flags
        for name, flags in c.execute(
            "SELECT name, flags FROM pragma_function_list WHERE name IN ('ref_scalar', 'ref_window')"
        )
    }
    rows = c.execute(
        "SELECT name, narg, type, flags FROM pragma_function_list "
        "WHERE name IN ('vec_cosine','fts5_query','rrf_version','rrf_debug','rrf_fuse','rrf_explain',"
        "'vec_signbits','rrf_hamming','rrf_topk','rrf_hamming_topk','rrf_sum','rrf_fold')"
    ).fetchall()
    assert len(rows) == len([k for k in EXPECTED if not k[0].startswith("rrf_bm25")])
    for name, narg, type_, flags in rows:
        assert flags & inn, name  # every function is innocuous
        assert not flags & apsw.SQLITE_DIRECTONLY, name
        if type_ == "s":
            assert flags & det, name
            assert flags == ref["ref_scalar"], name
        else:
            assert not flags & det, name  # aggregates are not marked deterministic
            assert flags == ref["ref_window"], name


def test_functions_are_usable_where_innocuous_is_required():
    """With trusted_schema off, only innocuous functions may run in views and triggers."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute("PRAGMA trusted_schema = OFF")
    c.execute(
        "CREATE TABLE t(v, r); INSERT INTO t VALUES (x'0000803f', 1);"
        "CREATE VIEW vw AS SELECT vec_cosine(v, '[1]') AS c, rrf_fuse(r) AS f, rrf_explain('l', r) AS e, "
        "fts5_query('a b') AS q, rrf_version() AS ver FROM t"
    )
    c_, f, e, q, ver = c.execute("SELECT * FROM vw").fetchone()
    assert c_ == 1.0 and f == pytest.approx(1 / 61) and json.loads(e)["l"]["rank"] == 1
    assert q == '"a" OR "b"' and ver == sqlite_rrf.__version__
    # deterministic scalars may be used in an index on an expression
    c.execute("CREATE INDEX ix ON t(vec_cosine(v, '[1]'))")
    c.execute("CREATE INDEX iq ON t(fts5_query(r))")


def test_registration_is_per_connection():
    a = apsw.Connection(":memory:")
    b = apsw.Connection(":memory:")
    sqlite_rrf.load(a)
    assert a.execute("SELECT rrf_fuse(1)").fetchone()[0] == pytest.approx(1 / 61)
    with pytest.raises(apsw.SQLError, match="no such function: rrf_fuse"):
        b.execute("SELECT rrf_fuse(1)").fetchall()


# ---------------------------------------------------------------- rrf_version, rrf_debug


def test_rrf_version_is_the_package_version(conn):
    assert conn.execute("SELECT rrf_version()").fetchone()[0] == sqlite_rrf.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", sqlite_rrf.__version__)


def test_rrf_debug_lines(conn):
    text = conn.execute("SELECT rrf_debug()").fetchone()[0]
    lines = text.split("\n")
    keys = [line.split(": ", 1)[0] for line in lines]
    want_keys = [
        "version",
        "simd",
        "simd_best",
        "kernels_built",
        "compiler",
        "sqlite_headers",
        "sqlite_runtime",
    ]
    if os.environ.get("SQLITE_RRF_SIMD") and "simd_note" in keys:
        want_keys.append("simd_note")
    assert keys == want_keys
    info = dict(line.split(": ", 1) for line in lines)
    assert info["version"] == sqlite_rrf.__version__
    paths = kernels.simd_paths()
    best = [p for p in paths if p != "scalar"][:1] or ["scalar"]
    assert info["simd_best"] == best[0]
    assert info["simd"] in paths
    assert set(paths) <= set(info["kernels_built"].split())  # what runs was built
    if not os.environ.get("SQLITE_RRF_SIMD"):
        assert info["simd"] == info["simd_best"]  # the best path by default
    assert info["sqlite_runtime"] == apsw.sqlite_lib_version()
    assert re.fullmatch(r"3\.\d+\.\d+", info["sqlite_headers"])
    assert info["compiler"]


# ---------------------------------------------------------------- the Python loader


def test_loadable_path_has_no_suffix_and_the_file_exists():
    path = sqlite_rrf.loadable_path()
    assert os.path.isabs(path)
    assert os.path.basename(path) == "rrf"  # SQLite derives sqlite3_rrf_init from it
    assert not path.endswith((".so", ".dylib", ".dll"))
    assert os.path.isfile(path + SO_SUFFIX)


def test_loadable_path_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("SQLITE_RRF_LOADABLE", str(tmp_path / "elsewhere" / "rrf"))
    assert sqlite_rrf.loadable_path() == str(tmp_path / "elsewhere" / "rrf")
    with pytest.raises(sqlite_rrf.ExtensionLoadError, match="not built"):
        sqlite_rrf.load(apsw.Connection(":memory:"))


def test_load_into_apsw_and_extension_loading_is_off_again():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    assert c.execute("SELECT vec_cosine('[1,0]', '[1,0]')").fetchone()[0] == 1.0
    # load() does not leave arbitrary extension loading enabled behind it
    with pytest.raises(apsw.Error):
        c.execute("SELECT load_extension(?)", (sqlite_rrf.loadable_path(),)).fetchall()
    sqlite_rrf.load(c)  # loading twice is harmless
    assert c.execute("SELECT rrf_fuse(2)").fetchone()[0] == pytest.approx(1 / 62)


def test_sql_load_extension_finds_the_entry_point_from_the_file_name():
    c = apsw.Connection(":memory:")
    c.enable_load_extension(True)
    c.execute("SELECT load_extension(?)", (sqlite_rrf.loadable_path(),)).fetchall()
    assert c.execute("SELECT rrf_version()").fetchone()[0] == sqlite_rrf.__version__
    d = apsw.Connection(":memory:")
    d.enable_load_extension(True)
    d.execute("SELECT load_extension(?, 'sqlite3_rrf_init')", (SO_PATH,)).fetchall()
    assert d.execute("SELECT fts5_query('x')").fetchone()[0] == '"x"'


def test_load_with_the_sqlite3_module_explains_and_points_to_apsw():
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions")
    conn = sqlite3.connect(":memory:")
    try:
        with pytest.raises(sqlite_rrf.ExtensionLoadError) as info:
            sqlite_rrf.load(conn)
    finally:
        conn.close()
    msg = str(info.value)
    assert "apsw" in msg
    assert "cannot load extensions" in msg
    assert sqlite_rrf.loadable_path() in msg  # and where the shell can .load it from


def test_load_with_a_capable_sqlite3_module():
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 cannot load extensions")
    conn = sqlite3.connect(":memory:")
    sqlite_rrf.load(conn)
    assert conn.execute("SELECT rrf_version()").fetchone()[0] == sqlite_rrf.__version__


# ---------------------------------------------------------------- the shared object


def _tool(name):
    path = shutil.which(name)
    if path is None or not sys.platform.startswith("linux"):
        pytest.skip(f"{name} (Linux binutils) not available")
    return path


def _nm(*flags):
    out = subprocess.run(
        [_tool("nm"), "-D", *flags, SO_PATH], capture_output=True, text=True, check=True
    )
    return [line.split()[-1] for line in out.stdout.splitlines() if line.strip()]


def test_only_the_entry_point_is_exported():
    assert _nm("--defined-only") == ["sqlite3_rrf_init"]


def test_no_python_symbol_and_no_sqlite_library_needed():
    undefined = _nm("--undefined-only")
    assert undefined  # libc/libm at least: the listing works
    assert not [s for s in undefined if s.startswith(("Py", "_Py"))]
    # SQLite is reached only through the sqlite3_api routines handed to the entry point
    assert not [s for s in undefined if s.startswith("sqlite3")]


def test_ldd_shows_no_libpython_and_no_libsqlite():
    out = subprocess.run([_tool("ldd"), SO_PATH], capture_output=True, text=True, check=True).stdout
    assert "libpython" not in out
    assert "libsqlite3" not in out
    assert "libc.so" in out  # the listing is real


# ---------------------------------------------------------------- Debian's sqlite3 shell


@pytest.fixture(scope="module")
def sqlite3_shell():
    path = shutil.which("sqlite3") or (
        "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else None
    )
    if path is None:
        pytest.skip(
            "the sqlite3 shell is missing: `make system-deps` installs Debian's sqlite3 package"
        )
    return path


def run_shell(shell, db, script):
    r = subprocess.run(
        [shell, "-batch", "-bail", str(db)],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and not r.stderr, r.stderr
    return r.stdout


EPISODES = [
    "the cat sat on the mat",
    "a dog chased the cat around the garden",
    "stock markets fell sharply on monday",
    "my cat likes warm mats and sunny windows",
    "recipes for a quick weeknight dinner",
    "the mat by the door is muddy",
    "cats and dogs living together",
    "notes about SQLite window functions",
]


def _make_hybrid_db(path):
    """A small episodes table + external-content FTS5 index, built without the extension."""
    rng = np.random.default_rng(11)
    emb = rng.standard_normal((len(EPISODES), 16)).astype("<f4")
    q = (emb[3] + 0.3 * rng.standard_normal(16)).astype("<f4")  # close to episode 4
    c = apsw.Connection(str(path))
    c.execute(
        "CREATE TABLE episodes(id INTEGER PRIMARY KEY, content TEXT NOT NULL, embedding BLOB);"
        "CREATE VIRTUAL TABLE episodes_fts USING fts5(content, content='episodes', content_rowid='id', "
        "tokenize='porter unicode61')"
    )
    for i, (text, e) in enumerate(zip(EPISODES, emb), start=1):
        c.execute("INSERT INTO episodes VALUES (?, ?, ?)", (i, text, e.tobytes()))
    c.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
    # the BM25 order as SQLite itself gives it (no extension function involved)
    bm25_ids = [
        r[0]
        for r in c.execute(
            'SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH \'"cat" OR "mat"\' ORDER BY bm25(episodes_fts), rowid'
        )
    ]
    c.close()
    return emb, q, bm25_ids


HYBRID_SQL = """
WITH
bm25 AS (
  SELECT id, row_number() OVER (ORDER BY score, id) AS rank FROM (
    SELECT rowid AS id, bm25(episodes_fts) AS score FROM episodes_fts
    WHERE episodes_fts MATCH fts5_query('Cat -mat*')
  )
),
scored AS (SELECT id, vec_cosine(embedding, x'{qhex}') AS sim FROM episodes),
vec AS (SELECT id, sim, row_number() OVER (ORDER BY sim DESC, id) AS rank FROM scored),
lists AS (
  SELECT id, 'bm25' AS list, rank, 1.0 AS weight FROM bm25
  UNION ALL SELECT id, 'vector', rank, 0.5 FROM vec
),
fused AS (
  SELECT DISTINCT id,
    rrf_fuse(rank, weight, 60) OVER (PARTITION BY id) AS score,
    rrf_explain(list, rank, weight, 60) OVER (PARTITION BY id) AS why
  FROM lists
)
SELECT fused.id, fused.score, vec.sim, fused.why FROM fused JOIN vec USING (id)
ORDER BY fused.score DESC, fused.id;
"""


def test_sqlite3_shell_loads_rrf_and_runs_a_fused_hybrid_query(sqlite3_shell, tmp_path):
    db = tmp_path / "hybrid.db"
    emb, q, bm25_ids = _make_hybrid_db(db)
    assert bm25_ids  # the query words are there
    script = f".load {sqlite_rrf.loadable_path()}\n.mode json\n" + HYBRID_SQL.format(
        qhex=q.tobytes().hex()
    )
    rows = json.loads(run_shell(sqlite3_shell, db, script))

    # the reference: numpy cosine ranks, SQLite's own BM25 order, RRF in plain Python
    e64, q64 = emb.astype(np.float64), q.astype(np.float64)
    sims = {
        i + 1: float(e64[i] @ q64 / (np.linalg.norm(e64[i]) * np.linalg.norm(q64)))
        for i in range(len(emb))
    }
    vec_rank = {d: r for r, d in enumerate(sorted(sims, key=lambda d: (-sims[d], d)), start=1)}
    bm25_rank = {d: r for r, d in enumerate(bm25_ids, start=1)}
    want = {
        d: 0.5 / (60 + vec_rank[d]) + (1.0 / (60 + bm25_rank[d]) if d in bm25_rank else 0.0)
        for d in sims
    }
    order = sorted(want, key=lambda d: (-want[d], d))

    assert [r["id"] for r in rows] == order
    for r in rows:
        d = r["id"]
        assert r["score"] == pytest.approx(want[d], rel=1e-12)
        assert r["sim"] == pytest.approx(sims[d], abs=1e-12)
        why = json.loads(r["why"])
        assert list(why) == (["bm25", "vector"] if d in bm25_rank else ["vector"])
        assert why["vector"]["rank"] == vec_rank[d] and why["vector"]["weight"] == 0.5
        if d in bm25_rank:
            assert why["bm25"]["rank"] == bm25_rank[d]
        assert math.fsum(x["contribution"] for x in why.values()) == pytest.approx(
            want[d], rel=1e-12
        )


def test_sqlite3_shell_calls_every_function(sqlite3_shell, tmp_path):
    script = (
        f".load {sqlite_rrf.loadable_path()}\n.mode json\n"
        "SELECT rrf_version() AS v, rrf_debug() AS d, fts5_query('hello world', 'and') AS q, "
        "vec_cosine('[1,2,3]', '[2,4,6]') AS c, "
        "(SELECT rrf_fuse(column1) FROM (VALUES (1), (2))) AS f, "
        "rrf_explain('bm25', 3) AS e;\n"
    )
    (row,) = json.loads(run_shell(sqlite3_shell, tmp_path / "x.db", script))
    assert row["v"] == sqlite_rrf.__version__
    dbg = dict(line.split(": ", 1) for line in row["d"].splitlines())
    assert dbg["version"] == sqlite_rrf.__version__
    # the shell's own SQLite library (not the one apsw bundles) is what runs the extension
    shell_version = subprocess.run(
        [sqlite3_shell, "-version"], capture_output=True, text=True
    ).stdout.split()[0]
    assert dbg["sqlite_runtime"] == shell_version
    assert row["q"] == '"hello" AND "world"'
    assert row["c"] == pytest.approx(1.0, abs=1e-12)
    assert row["f"] == pytest.approx(1 / 61 + 1 / 62, rel=1e-12)
    assert json.loads(row["e"])["bm25"]["rank"] == 3


def test_sqlite3_shell_reports_errors_by_name(sqlite3_shell, tmp_path):
    script = f".load {sqlite_rrf.loadable_path()}\nSELECT vec_cosine('[1,2]', '[1,2,3]');\n"
    r = subprocess.run(
        [sqlite3_shell, "-batch", str(tmp_path / "x.db")],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "vec_cosine: dimension mismatch: 2 vs 3" in r.stderr
