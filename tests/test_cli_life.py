"""A memory's whole life from the command line: ``list``/``ls``, ``get``,
``update``/``edit``, ``forget``/``rm``, ``export`` (and ``import`` back), ``vacuum`` and
``stats`` by scope, run as a user runs them (``python -m sqlite_rrf`` in a subprocess, once
the ``sqlite-rrf`` script) on real database files, read back with apsw.

Expectations are computed here from the episodes the tests write, never copied from the
output. No model is available (``SQLITE_RRF_MODEL`` unset, an empty offline Hugging Face
cache) except in the test marked ``embed``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import apsw
import pytest

REPO = Path(__file__).resolve().parent.parent
MODEL = os.environ.get("SQLITE_RRF_MODEL") or str(
    REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"
)

DAY = 86_400_000
T0 = 1_763_000_000_000  # 2025-11-13T02:13:20Z

#: The episodes of most tests: three scopes (the shared one stored as ''), kinds, metadata
#: with non-ASCII text and nesting, times, access counts, importance, 4-dim embeddings.
EPISODES: List[Dict[str, Any]] = [
    dict(
        id="tea",
        content="The user prefers green tea, no sugar.",
        scope="",
        kind="preference",
        importance="high",
        metadata={"source": "chat", "tags": ["drink", "thé"]},
        created_at=T0,
        accessed_at=T0 + 5 * DAY,
        access_count=3,
        embedding=[0.1, 0.2, 0.3, 0.4],
    ),
    dict(
        id="db",
        content="We chose SQLite for the agent's memory.",
        scope="shop",
        kind="decision",
        created_at=T0 + DAY,
        access_count=0,
        embedding=[0.9, 0.1, 0.0, 0.1],
    ),
    dict(
        id="deploy",
        content="Shop deploys go out on Tuesdays.",
        scope="shop",
        kind="fact",
        metadata={"n": 1.5, "nested": {"deep": [None, True, "ü"]}},
        created_at=T0 + 2 * DAY,
        accessed_at=T0 + 9 * DAY,
        access_count=7,
        importance="low",
        embedding=[0.3, 0.3, 0.3, 0.3],
    ),
    dict(
        id="blog",
        content="The blog runs on a static site generator.",
        scope="blog",
        created_at=T0 + 3 * DAY,
        embedding=[0.2, 0.7, 0.1, 0.05],
    ),
    dict(
        id="style",
        content="Code style: four spaces, no tabs.\nLine two of the text.",
        scope="",
        kind="fact",
        created_at=T0 + 4 * DAY,
        embedding=[0.5, 0.5, 0.1, 0.2],
    ),
]


def run(
    *args: Any,
    cwd: Path,
    model: str = "",
    stdin: Optional[str] = None,
    script: bool = False,
    env: Optional[Dict[str, str]] = None,
) -> subprocess.CompletedProcess:
    """The CLI in a subprocess; no model unless ``model``."""
    e = dict(os.environ)
    for k in ("SQLITE_RRF_LOADABLE", "SQLITE_RRF_MODEL"):
        e.pop(k, None)
    e["HF_HUB_OFFLINE"] = "1"
    e["HF_HUB_CACHE"] = str(cwd / "empty-hf-cache")
    if model:
        e["SQLITE_RRF_MODEL"] = model
    e.update(env or {})
    cmd = (
        [str(Path(sys.executable).parent / "sqlite-rrf")]
        if script
        else [sys.executable, "-m", "sqlite_rrf"]
    )
    return subprocess.run(
        cmd + [str(a) for a in args],
        cwd=str(cwd),
        env=e,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    return p


CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")


def fails_clearly(p: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 1, one line on stderr naming the fault, no traceback or class name."""
    assert p.returncode == 1, f"exit {p.returncode}\nstdout: {p.stdout}\nstderr: {p.stderr}"
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("sqlite-rrf: ") and not CLASS_NAME.search(lines[0]), lines[0]
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


def make_db(tmp_path: Path, name: str = "m.db", episodes=EPISODES) -> Path:
    src = tmp_path / f"{name}.jsonl"
    src.write_text(
        "".join(json.dumps(ep, ensure_ascii=False) + "\n" for ep in episodes), encoding="utf-8"
    )
    db = tmp_path / name
    ok(run("import", db, src, cwd=tmp_path))
    return db


def rows(db: Path, where: str = "1", params=()) -> Dict[str, Dict[str, Any]]:
    """The episodes of ``db`` by id, every column, read with apsw."""
    c = apsw.Connection(str(db))
    try:
        names = ["rowid"] + [r[1] for r in c.execute("PRAGMA table_info(episodes)")]
        cur = c.execute(f"SELECT rowid, * FROM episodes WHERE {where}", params)
        return {r[names.index("id")]: dict(zip(names, r)) for r in cur}
    finally:
        c.close()


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def listed_ids(stdout: str) -> List[str]:
    """The ids of ``list``'s text output: the head lines (not indented)."""
    return [
        ln.split()[0]
        for ln in stdout.splitlines()
        if ln and not ln.startswith(" ") and not ln.startswith("(")
    ]


# ---- list ----


def test_list_newest_first_with_human_dates(tmp_path):
    db = make_db(tmp_path)
    p = ok(run("list", db, cwd=tmp_path))
    newest_first = [e["id"] for e in sorted(EPISODES, key=lambda e: -e["created_at"])]
    assert listed_ids(p.stdout) == newest_first
    for ep in EPISODES:
        (head,) = [ln for ln in p.stdout.splitlines() if ln.startswith(ep["id"] + " ")]
        # a human date: the ISO time and how long ago, never the epoch milliseconds
        assert re.search(re.escape(iso(ep["created_at"])) + r" \(\d+ \w+ ago\)", head), head
        assert str(ep["created_at"]) not in p.stdout
        assert f"scope {ep['scope'] or 'shared'}" in head
        assert ("  kind " in head) == ("kind" in ep)
        if "kind" in ep:
            assert f"  kind {ep['kind']}" in head
    assert "The user prefers green tea" in p.stdout
    # ls is list, and so is the installed script
    assert ok(run("ls", db, cwd=tmp_path)).stdout == p.stdout
    assert ok(run("list", db, cwd=tmp_path, script=True)).stdout == p.stdout


def test_list_filters_and_limit(tmp_path):
    db = make_db(tmp_path)

    def ids(*opts):
        return listed_ids(ok(run("list", db, *opts, cwd=tmp_path)).stdout)

    def expect(pred):
        return [e["id"] for e in sorted(EPISODES, key=lambda e: -e["created_at"]) if pred(e)]

    assert ids("--scope", "shared") == expect(lambda e: e["scope"] == "")
    assert ids("--scope", "") == expect(lambda e: e["scope"] == "")
    assert ids("--scope", "shop") == expect(lambda e: e["scope"] == "shop")
    assert ids("--scope", "*") == expect(lambda e: True)
    assert ids("--kind", "fact") == expect(lambda e: e.get("kind") == "fact")
    since, until = T0 + DAY, T0 + 3 * DAY
    assert ids("--since", iso(since)[:-1], "--until", iso(until)) == expect(
        lambda e: since <= e["created_at"] < until
    )
    assert ids("--since", str(since), "--scope", "shop", "--kind", "fact") == ["deploy"]
    p = ok(run("list", db, "--limit", "2", cwd=tmp_path))
    assert listed_ids(p.stdout) == expect(lambda e: True)[:2]
    assert f"2 of {len(EPISODES)} shown" in p.stdout
    assert listed_ids(ok(run("list", db, "--limit", "0", cwd=tmp_path)).stdout) == expect(
        lambda e: True
    )
    assert ok(run("list", db, "--scope", "nowhere", cwd=tmp_path)).stdout.startswith(
        "no episodes match (scope nowhere)"
    )
    fails_clearly(run("list", db, "--since", "the day the moon fell", cwd=tmp_path), "--since")
    fails_clearly(run("list", db, "--limit", "-1", cwd=tmp_path), "--limit")
    fails_clearly(run("list", tmp_path / "nope.db", cwd=tmp_path), "no such database")
    assert not (tmp_path / "nope.db").exists()


def test_list_json_is_one_object_per_line_with_machine_values(tmp_path):
    db = make_db(tmp_path)
    p = ok(run("list", db, "--json", "--scope", "*", cwd=tmp_path))
    got = [json.loads(ln) for ln in p.stdout.splitlines()]
    want = sorted(EPISODES, key=lambda e: -e["created_at"])
    assert [g["id"] for g in got] == [e["id"] for e in want]
    for g, e in zip(got, want):
        assert g["content"] == e["content"]
        assert g["scope"] == (e["scope"] or "shared")
        assert g["kind"] == e.get("kind")
        assert g["metadata"] == e.get("metadata")
        assert g["created_at"] == e["created_at"]
        assert g["accessed_at"] == e.get("accessed_at", e["created_at"])
        assert g["access_count"] == e.get("access_count", 0)
        assert g["importance"] == e.get("importance", "normal")
        assert g["embedded"] is True


# ---- get ----


def test_get_shows_everything_about_one_episode(tmp_path):
    db = make_db(tmp_path)
    ep = EPISODES[2]
    p = ok(run("get", db, ep["id"], cwd=tmp_path))
    fields = dict(
        re.match(r"\s*(\w+): ?(.*)$", ln).groups()
        for ln in p.stdout.splitlines()
        if re.match(r"\s*\w+:", ln)
    )
    assert fields["id"] == ep["id"] and fields["scope"] == "shop"
    assert fields["kind"] == "fact" and fields["importance"] == "low"
    assert fields["created"].startswith(iso(ep["created_at"]) + " (")
    assert fields["accessed"].startswith(iso(ep["accessed_at"]) + " (")
    assert fields["accesses"] == "7" and fields["embedding"] == "4 dimensions"
    assert json.loads(fields["metadata"]) == ep["metadata"]
    assert ep["content"] in p.stdout
    # every line of a text of several lines
    assert "Line two of the text." in ok(run("get", db, "style", cwd=tmp_path)).stdout
    got = json.loads(ok(run("get", db, ep["id"], "--json", cwd=tmp_path)).stdout)
    row = rows(db)[ep["id"]]
    assert got == {
        "id": ep["id"],
        "content": row["content"],
        "scope": "shop",
        "kind": row["kind"],
        "importance": row["importance"],
        "metadata": json.loads(row["metadata"]),
        "created_at": row["created_at"],
        "accessed_at": row["accessed_at"],
        "access_count": row["access_count"],
        "embedded": True,
        "embedding_dim": 4,
        "superseded_by": None,
        "confirmed_at": None,
        "replaced": [],
    }
    fails_clearly(run("get", db, "nope", cwd=tmp_path), "get: no episode with id 'nope'")


def test_texts_cannot_drive_the_terminal(tmp_path):
    """A text, kind or metadata written by any client, with escape sequences and carriage
    returns, is printed with those characters written out (\\x1b), never raw."""
    db = make_db(
        tmp_path,
        episodes=[
            dict(
                id="evil",
                content="before \x1b[2J after\roverwritten\nsecond line",
                kind="k\x1b[31m",
                metadata={"x": "\x9b31m"},
                created_at=T0,
            )
        ],
    )
    for args in (("get", db, "evil"), ("list", db), ("stats", db)):
        out = ok(run(*args, cwd=tmp_path)).stdout
        assert not any(ch in out for ch in "\x1b\r\x9b"), (args, out)
    out = ok(run("get", db, "evil", cwd=tmp_path)).stdout
    assert "before \\x1b[2J after\\x0doverwritten\n   second line" in out
    assert "kind: k\\x1b[31m" in out and "\\x9b31m" in out
    # the data itself is exact
    assert (
        json.loads(ok(run("get", db, "evil", "--json", cwd=tmp_path)).stdout)["content"]
        == "before \x1b[2J after\roverwritten\nsecond line"
    )


# ---- update ----


def test_update_changes_the_fields_given_and_keeps_the_others(tmp_path):
    db = make_db(tmp_path)
    before = rows(db)["tea"]
    p = ok(
        run(
            "update",
            db,
            "tea",
            "--kind",
            "habit",
            "--importance",
            "low",
            "--metadata",
            '{"source": "form", "ü": [1, 2]}',
            "--scope",
            "home",
            cwd=tmp_path,
        )
    )
    assert p.stdout.startswith("updated tea\n")
    after = rows(db)["tea"]
    assert (after["kind"], after["importance"], after["scope"]) == ("habit", "low", "home")
    assert json.loads(after["metadata"]) == {"source": "form", "ü": [1, 2]}
    for k in ("content", "embedding", "created_at", "accessed_at", "access_count", "rowid"):
        assert after[k] == before[k], k
    # the shared scope by its name; '' clears the kind; --no-metadata removes the metadata
    ok(run("edit", db, "tea", "--scope", "shared", "--kind", "", "--no-metadata", cwd=tmp_path))
    after = rows(db)["tea"]
    assert (after["scope"], after["kind"], after["metadata"]) == ("", None, None)
    got = json.loads(
        ok(run("update", db, "tea", "--importance", "high", "--json", cwd=tmp_path)).stdout
    )
    assert got["importance"] == "high" and got["scope"] == "shared"
    # a new text without a model: the old embedding (of the old text) is dropped, the
    # full-text index follows
    ok(run("update", db, "tea", "--text", "The user now drinks black coffee.", cwd=tmp_path))
    after = rows(db)["tea"]
    assert after["content"] == "The user now drinks black coffee." and after["embedding"] is None
    c = apsw.Connection(str(db))
    assert c.execute(
        "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH 'coffee'"
    ).fetchall() == [(after["rowid"],)]
    assert (
        c.execute("SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH 'tea'").fetchall() == []
    )
    c.close()
    unchanged = rows(db)
    fails_clearly(run("update", db, "tea", cwd=tmp_path), "update: nothing to change")
    fails_clearly(
        run("update", db, "nope", "--kind", "x", cwd=tmp_path), "update: no episode with id 'nope'"
    )
    fails_clearly(run("update", db, "tea", "--scope", "*", cwd=tmp_path), "--scope")
    fails_clearly(
        run("update", db, "tea", "--metadata", "[1]", cwd=tmp_path), "--metadata", "JSON object"
    )
    fails_clearly(
        run("update", db, "tea", "--metadata", "{oops", cwd=tmp_path), "--metadata", "JSON object"
    )
    fails_clearly(run("update", db, "tea", "--text", "  ", cwd=tmp_path), "--text")
    assert rows(db) == unchanged


@pytest.mark.embed
@pytest.mark.skipif(not os.path.isfile(MODEL), reason="the embedding model is not there")
def test_update_embeds_a_new_text_with_the_model(tmp_path):
    db = tmp_path / "m.db"
    eid = ok(
        run("add", db, "The user prefers green tea.", cwd=tmp_path, model=MODEL)
    ).stdout.strip()
    old = rows(db)[eid]["embedding"]
    ok(run("update", db, eid, "--text", "Deploys go out on Tuesdays.", cwd=tmp_path, model=MODEL))
    new = rows(db)[eid]["embedding"]
    assert new is not None and len(new) == 384 * 4 and new != old
    # the same vector as the text added afresh
    other = ok(
        run("add", db, "Deploys go out on Tuesdays.", "--scope", "x", cwd=tmp_path, model=MODEL)
    ).stdout.strip()
    assert rows(db)[other]["embedding"] == new


# ---- forget ----


def test_forget_by_id_is_all_or_nothing(tmp_path):
    db = make_db(tmp_path)
    fails_clearly(
        run("forget", db, "tea", "nope", cwd=tmp_path),
        "forget: no episode with id 'nope'",
        "nothing",
    )
    assert set(rows(db)) == {e["id"] for e in EPISODES}
    p = ok(run("forget", db, "tea", "db", cwd=tmp_path))
    assert p.stdout.strip() == "forgot 2 episodes"
    assert set(rows(db)) == {e["id"] for e in EPISODES} - {"tea", "db"}
    ok(run("rm", db, "blog", cwd=tmp_path))
    assert "blog" not in rows(db)
    c = apsw.Connection(str(db))  # the full-text index followed
    assert c.execute(
        "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'blog OR tea OR sqlite'"
    ).fetchall() == [(0,)]
    c.close()
    fails_clearly(run("forget", db, cwd=tmp_path), "forget: give the ids")
    fails_clearly(run("forget", db, "style", "--scope", "shop", cwd=tmp_path), "not both")


def test_forget_by_filters_needs_yes(tmp_path):
    db = make_db(tmp_path)
    p = run("forget", db, "--scope", "shop", cwd=tmp_path)
    fails_clearly(p, "nothing was forgotten", "--yes", "2 episodes")
    shop = [
        e["id"] for e in sorted(EPISODES, key=lambda e: -e["created_at"]) if e["scope"] == "shop"
    ]
    assert p.stdout.splitlines()[0] == "2 episodes match (scope shop):"
    assert listed_ids("\n".join(p.stdout.splitlines()[1:])) == shop
    assert set(rows(db)) == {e["id"] for e in EPISODES}  # nothing deleted
    p = ok(run("forget", db, "--scope", "shop", "--yes", cwd=tmp_path))
    assert p.stdout.startswith("forgot 2 episodes (scope shop)")
    assert set(rows(db)) == {e["id"] for e in EPISODES if e["scope"] != "shop"}
    # the shared scope by name, a kind, a time window
    ok(run("forget", db, "--scope", "shared", "--kind", "fact", "--yes", cwd=tmp_path))
    assert set(rows(db)) == {"tea", "blog"}
    ok(run("forget", db, "--until", iso(T0 + DAY), "--yes", cwd=tmp_path))
    assert set(rows(db)) == {"blog"}
    p = ok(run("forget", db, "--kind", "nothing-like-it", cwd=tmp_path))
    assert "nothing to forget" in p.stdout
    ok(run("forget", db, "--scope", "*", "--yes", cwd=tmp_path))
    assert rows(db) == {}


# ---- export and import ----


def test_export_import_export_is_byte_identical(tmp_path):
    extra = [
        dict(
            id="no-vector",
            content="Stored without an embedding, ünïcödé ✓ 中文",
            scope="shop",
            metadata="plain text metadata",
            created_at=T0 + 6 * DAY,
        )
    ]
    db = make_db(tmp_path, episodes=EPISODES + extra)
    p = ok(run("export", db, "-o", tmp_path / "a.jsonl", cwd=tmp_path))
    assert (
        p.stdout.strip() == f"exported {len(EPISODES) + 1} episodes from {db} to "
        f"{tmp_path / 'a.jsonl'}"
    )
    a = (tmp_path / "a.jsonl").read_bytes()
    lines = [json.loads(ln) for ln in a.decode("utf-8").splitlines()]
    assert [ln["id"] for ln in lines] == [e["id"] for e in EPISODES + extra]  # row order
    for ln, ep in zip(lines, EPISODES + extra):
        assert ln["content"] == ep["content"] and ln["scope"] == ep["scope"]
        assert ln["metadata"] == ep.get("metadata") and ln["kind"] == ep.get("kind")
        assert ln["created_at"] == ep["created_at"]
        assert ln["access_count"] == ep.get("access_count", 0)
        if "embedding" in ep:  # float32 values, exactly
            assert ln["embedding"] == [
                float(__import__("numpy").float32(x)) for x in ep["embedding"]
            ]
        else:
            assert ln["embedding"] is None
    new = tmp_path / "new.db"
    ok(run("import", new, tmp_path / "a.jsonl", cwd=tmp_path))
    b = ok(run("export", new, cwd=tmp_path)).stdout.encode("utf-8")
    assert b == a
    # the databases hold the same episodes, field by field, rowids included
    assert rows(new) == rows(db)
    # a filtered export, and one without embeddings, import back too
    shop = ok(run("export", db, "--scope", "shop", "--no-embeddings", cwd=tmp_path)).stdout
    got = [json.loads(ln) for ln in shop.splitlines()]
    assert [g["id"] for g in got] == ["db", "deploy", "no-vector"]
    assert all(g["embedding"] is None for g in got)
    ok(run("import", tmp_path / "shop.db", "-", cwd=tmp_path, stdin=shop))
    assert set(rows(tmp_path / "shop.db")) == {"db", "deploy", "no-vector"}
    # an -o that cannot be written: one line, and no file
    fails_clearly(run("export", db, "-o", tmp_path / "no-dir" / "x.jsonl", cwd=tmp_path), "-o")
    assert not (tmp_path / "no-dir").exists()


def test_import_takes_the_shared_scope_by_name(tmp_path):
    """A line's scope 'shared' is the shared scope (stored ''), as everywhere a scope is
    taken; '*' and quotes only are refused with the line's number, nothing imported."""
    db = tmp_path / "m.db"
    ok(
        run(
            "import",
            db,
            "-",
            cwd=tmp_path,
            stdin=json.dumps(
                {"id": "a", "content": "the user prefers green tea", "scope": "shared"}
            )
            + "\n",
        )
    )
    assert rows(db)["a"]["scope"] == ""
    for bad in ("*", '""'):
        lines = (
            json.dumps({"id": "b", "content": "fine"})
            + "\n"
            + json.dumps({"id": "c", "content": "x", "scope": bad})
            + "\n"
        )
        fails_clearly(
            run("import", db, "-", cwd=tmp_path, stdin=lines),
            "line 2",
            "scope",
            "nothing was imported",
        )
    assert set(rows(db)) == {"a"}


# ---- vacuum ----


def _disk(db: Path) -> int:
    return sum(os.path.getsize(p) for p in (db, Path(f"{db}-wal")) if p.exists())


def test_vacuum_gives_back_the_space_of_a_large_forget(tmp_path):
    r = random.Random(23)
    words = [
        "".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(3, 9)))
        for _ in range(5000)
    ]
    big = [
        dict(
            id=f"big{i}",
            scope="big",
            content=" ".join(r.choice(words) for _ in range(150)),
            embedding=[r.random() + 0.01 for _ in range(4)],
        )
        for i in range(2000)
    ]
    db = make_db(tmp_path, episodes=EPISODES + big)
    full = _disk(db)
    assert full > 2_500_000
    p = ok(run("forget", db, "--scope", "big", "--yes", cwd=tmp_path))
    assert p.stdout.startswith("forgot 2000 episodes (scope big); the file keeps its size")
    assert f"sqlite-rrf vacuum {db}" in p.stdout
    after_forget = _disk(db)
    assert after_forget >= full * 0.9  # deleting alone gives nothing back to the disk
    p = ok(run("vacuum", db, cwd=tmp_path))
    after = _disk(db)
    assert after < full / 10, (full, after)
    assert not Path(f"{db}-wal").exists() or os.path.getsize(f"{db}-wal") == 0
    m = re.fullmatch(
        r"(.+): ([\d.]+) (MB|kB|bytes) -> ([\d.]+) (MB|kB|bytes) \(.+ given back "
        r"to the disk\)\n",
        p.stdout,
    )
    assert m and m.group(1) == str(db), p.stdout
    scale = {"MB": 1e6, "kB": 1e3, "bytes": 1}
    assert abs(float(m.group(2)) * scale[m.group(3)] - after_forget) <= 0.05e6
    assert abs(float(m.group(4)) * scale[m.group(5)] - after) <= 1e3
    got = json.loads(ok(run("vacuum", db, "--json", cwd=tmp_path)).stdout)
    assert got["size_before"] == after and got["size_after"] <= after and got["wal_emptied"]
    # what is left is whole: the check finds nothing, the full-text index finds its texts
    ok(run("check", db, cwd=tmp_path))
    assert set(rows(db)) == {e["id"] for e in EPISODES}
    assert _fts_bytes(db) < 20_000
    c = apsw.Connection(str(db))
    assert c.execute(
        "SELECT e.id FROM episodes_fts JOIN episodes AS e ON e.rowid = "
        "episodes_fts.rowid WHERE episodes_fts MATCH 'tea'"
    ).fetchall() == [("tea",)]
    c.close()


def test_vacuum_beside_a_reader_says_the_wal_waits(tmp_path):
    """Another process reading: VACUUM still rebuilds the file (into the -wal), the
    checkpoint cannot empty the -wal while the reader holds its snapshot, and vacuum says
    so instead of waiting out the busy timeout; once the reader is gone, vacuum again
    gives the space back."""
    r = random.Random(5)
    big = [
        dict(
            id=f"big{i}",
            scope="big",
            content=" ".join("".join(r.choice("abcdefghij") for _ in range(6)) for _ in range(120)),
            embedding=[r.random() + 0.01 for _ in range(4)],
        )
        for i in range(600)
    ]
    db = make_db(tmp_path, episodes=EPISODES + big)
    ok(run("forget", db, "--scope", "big", "--yes", cwd=tmp_path))
    full = _disk(db)
    reader = apsw.Connection(str(db))
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM episodes").fetchall() == [(len(EPISODES),)]
        p = ok(run("vacuum", db, "--json", cwd=tmp_path))
        got = json.loads(p.stdout)
        assert got["wal_emptied"] is False and got["wal_bytes"] > 0
        assert "another process is reading" in p.stderr and "-wal" in p.stderr
        assert not CLASS_NAME.search(p.stderr)
        # the reader's snapshot is whole
        assert reader.execute("SELECT count(*) FROM episodes").fetchall() == [(len(EPISODES),)]
        reader.execute("COMMIT")
    finally:
        reader.close()
    got = json.loads(ok(run("vacuum", db, "--json", cwd=tmp_path)).stdout)
    assert got["wal_emptied"] is True and got["size_after"] < full / 4
    assert set(rows(db)) == {e["id"] for e in EPISODES}
    # the full-text index holds the 5 episodes' entries only (FTS5's optimize would have
    # left the deleted ones' entries here: one segment, 537 kB)
    assert _fts_bytes(db) < 20_000


def _fts_bytes(db: Path) -> int:
    c = apsw.Connection(str(db))
    try:
        return c.execute("SELECT sum(length(block)) FROM episodes_fts_data").fetchall()[0][0]
    finally:
        c.close()


def _read_only_mount(src: Path, mnt: Path) -> bool:
    """Bind-mount ``src`` read-only at ``mnt``; False where this machine does not allow it."""
    mnt.mkdir()
    if shutil.which("mount") is None:
        return False
    if subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True).returncode:
        return False
    if subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True).returncode:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        return False
    return True


def test_vacuum_and_forget_refuse_a_read_only_file(tmp_path):
    src = tmp_path / "media"
    src.mkdir()
    db = make_db(src)
    ok(run("forget", db, "db", cwd=tmp_path))  # free pages to give back
    c = apsw.Connection(str(db))
    c.execute("PRAGMA journal_mode = DELETE")
    c.close()
    before = db.read_bytes()
    mnt = tmp_path / "ro"
    if not _read_only_mount(src, mnt):
        pytest.skip("cannot bind-mount a read-only file system here")
    try:
        rodb = mnt / db.name
        fails_clearly(
            run("vacuum", rodb, cwd=tmp_path), "vacuum:", "read-only", "nothing was changed"
        )
        fails_clearly(run("forget", rodb, "tea", cwd=tmp_path), "read-only")
        fails_clearly(run("update", rodb, "tea", "--kind", "x", cwd=tmp_path), "read-only")
        # reading works
        assert "tea" in listed_ids(ok(run("list", rodb, cwd=tmp_path)).stdout)
        assert ok(run("export", rodb, cwd=tmp_path)).stdout.count("\n") == len(EPISODES) - 1
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    assert db.read_bytes() == before


# ---- stats ----


def test_stats_by_scope_with_human_dates(tmp_path):
    db = make_db(tmp_path)
    p = ok(run("stats", db, cwd=tmp_path))
    fields = dict(re.match(r"\s*(\w+): (.*)$", ln).groups() for ln in p.stdout.splitlines())
    counts: Dict[str, int] = {}
    for e in EPISODES:
        counts[e["scope"] or "shared"] = counts.get(e["scope"] or "shared", 0) + 1
    shown = dict(part.rsplit(" ", 1) for part in fields["by_scope"].split(", "))
    assert {k: int(v) for k, v in shown.items()} == counts
    oldest = min(e["created_at"] for e in EPISODES)
    newest = max(e["created_at"] for e in EPISODES)
    assert re.fullmatch(re.escape(iso(oldest)) + r" \(\d+ \w+ ago\)", fields["oldest_created_at"])
    assert fields["newest_created_at"].startswith(iso(newest) + " (")
    assert str(oldest) not in p.stdout and str(newest) not in p.stdout
    st = json.loads(ok(run("stats", db, "--json", cwd=tmp_path)).stdout)
    assert st["by_scope"] == counts
    assert st["oldest_created_at"] == oldest and st["newest_created_at"] == newest
    assert st["episodes"] == len(EPISODES)
    assert fields["size_bytes"].endswith(f"({st['size_bytes']:,} bytes)")


# ---- help ----


def test_eval_help_names_the_default_model_a_user_has():
    from sqlite_rrf.embedding.models import DEFAULT_MODEL

    p = ok(run("eval", "--help", cwd=REPO))
    text = "".join(p.stdout.split())  # argparse wraps the name at its hyphens
    assert "../shared" not in text
    assert DEFAULT_MODEL in text and "$SQLITE_RRF_MODEL" in text


def test_import_help_names_every_field_export_writes():
    from sqlite_rrf.app.manage import EXPORT_FIELDS

    text = " ".join(ok(run("import", "--help", cwd=REPO)).stdout.split())
    for field in EXPORT_FIELDS:
        assert field in text, field
