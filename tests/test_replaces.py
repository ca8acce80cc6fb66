"""A fact that replaces another (``replaces``; ``episodes.superseded_by``, migration 0012):
the Tuesday → Thursday scenario through the Store, the command line (``add --replaces``,
``list --all``, ``get``, ``recall --include-superseded``, ``export``/``import``), the real
hook command, MCP (the SDK's stdio client) and Datasette's ``recall.json``; and the hint
that a new text may update an older one (:func:`sqlite_rrf.store.facts.likely_update`)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from sqlite_rrf.store import Store, StoreError
from sqlite_rrf.store.facts import differs_in_detail

OLD = "Shop deploys go out on Tuesdays after the nightly Postgres backup."
NEW = "Shop deploys moved from Tuesdays to Thursdays, after the nightly Postgres backup."
QUESTION = "when do shop deploys go out?"
OTHERS = [
    dict(id="vault", scope="shop", content="The shop's Postgres credentials are kept in Vault."),
    dict(id="blog", scope="blog", content="The blog deploys on Fridays from the main branch."),
    dict(id="tea", scope="", content="The user prefers green tea, no sugar."),
]


def env() -> Dict[str, str]:
    """No model (offline, no SQLITE_RRF_MODEL): the BM25, recency and access lists."""
    e = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    e.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE="/nonexistent-hf-cache", HF_HOME="/nonexistent")
    return e


def cli(*argv: str, stdin: str = "", ok: bool = True) -> Tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv],
        input=stdin.encode(),
        capture_output=True,
        timeout=120,
        env=env(),
    )
    out, err = p.stdout.decode(), p.stderr.decode()
    if ok:
        assert p.returncode == 0, (argv, out, err)
    return p.returncode, out, err


def make_db(path: Path) -> Path:
    with Store(path) as s:
        s.add_many([dict(id="deploys", scope="shop", content=OLD), *OTHERS])
    return path


def recalled(db: Path, *extra: str) -> List[str]:
    _, out, _ = cli(
        "recall", str(db), QUESTION, "--json", "--scope", "shop", "--min-relevance", "0",
        "--no-touch", *extra,
    )  # fmt: skip
    data = json.loads(out)
    hits = data["hits"] if isinstance(data, dict) else data
    return [h["id"] for h in hits]


# ---- the Store ----


def test_replaces_marks_the_old_fact_and_recall_leaves_it_out(tmp_path):
    db = make_db(tmp_path / "m.db")
    with Store(db) as s:
        new = s.remember(NEW, scope="shop", replaces="deploys")
        assert s.superseded_by("deploys") == new
        assert s.superseded_by(new) is None
        ids = [h.id for h in s.recall(QUESTION, scope="shop", touch=False, force=True)]
        assert new in ids and "deploys" not in ids
        every = [
            h.id
            for h in s.recall(
                QUESTION, scope="shop", touch=False, force=True, include_superseded=True
            )
        ]
        assert "deploys" in every and new in every
        assert s.get("deploys").content == OLD  # kept as it was
        assert s.stats()["superseded"] == 1


def test_replaces_an_unknown_id_writes_nothing(tmp_path):
    db = make_db(tmp_path / "m.db")
    with Store(db) as s:
        n = s.stats()["episodes"]
        with pytest.raises(StoreError, match=r"^replaces: no episode with id 'nope'"):
            s.add(NEW, scope="shop", replaces="nope")
        with pytest.raises(StoreError, match=r"^replaces: .*more than the 256"):
            s.add(NEW, scope="shop", replaces="x" * 257)
        assert s.stats()["episodes"] == n


def test_asserting_the_old_fact_again_with_replaces_makes_it_current(tmp_path):
    db = make_db(tmp_path / "m.db")
    with Store(db) as s:
        new = s.add(NEW, scope="shop", replaces="deploys")
        again = s.add_many([dict(content=OLD, scope="shop")])  # no replaces: stays replaced
        assert again[0] == "deploys" and again.superseded == {0: ("deploys", new)}
        assert s.superseded_by("deploys") == new
        back = s.add(OLD, scope="shop", replaces=new)  # the agent says it is true again
        assert back == "deploys"
        assert s.superseded_by("deploys") is None and s.superseded_by(new) == "deploys"


# ---- the command line, the hook ----


def test_the_command_line_and_the_hook_never_show_the_replaced_fact(tmp_path):
    db = make_db(tmp_path / "m.db")
    assert "deploys" in recalled(db)
    original = tmp_path / "original.jsonl"
    _, out, _ = cli("export", str(db))
    original.write_text(out)

    _, out, err = cli("add", str(db), NEW, "--scope", "shop", "--replaces", "deploys")
    new = out.strip()
    assert "episode deploys is replaced by " + new in err
    assert recalled(db)[:1] == [new] and "deploys" not in recalled(db)
    assert "deploys" in recalled(db, "--include-superseded")

    _, out, _ = cli("list", str(db))
    assert not any(line.startswith("deploys ") for line in out.splitlines()) and new in out
    _, out, _ = cli("list", str(db), "--all")
    assert "deploys  " in out and f"[replaced by {new}]" in out
    _, out, _ = cli("get", str(db), "deploys")
    assert f"replaced by: {new}" in out
    _, out, _ = cli("get", str(db), new)
    assert "replaces: deploys" in out
    _, out, _ = cli("get", str(db), "deploys", "--json")
    assert json.loads(out)["superseded_by"] == new

    # re-importing the original export (ids and all) does not bring the old text back
    _, out, _ = cli("import", str(db), str(original), "--replace")
    assert "replaced by " + new in out and "not imported" in out, out
    # nor does a line of the old text without an id
    line = json.dumps(dict(content=OLD, scope="shop"))
    _, out, _ = cli("import", str(db), "-", stdin=line + "\n")
    assert "imported 0 episodes" in out and "not imported" in out, out
    assert "deploys" not in recalled(db)
    with Store(db) as s:
        assert s.superseded_by("deploys") == new

    # an export and import into a new database keeps the old fact replaced
    _, out, _ = cli("export", str(db))
    fresh = tmp_path / "fresh.db"
    cli("import", str(fresh), "-", stdin=out)
    assert "deploys" not in recalled(fresh) and new in recalled(fresh)
    with Store(fresh) as s:
        assert s.superseded_by("deploys") == new

    # the hook, run as the host runs it
    payload = {"prompt": QUESTION, "session_id": "s1", "hook_event_name": "UserPromptSubmit"}
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "hook", str(db), "--scope", "shop",
         "--min-relevance", "0", "--no-server"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=120,
        env=env(),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    shown = p.stdout.decode()
    assert "Thursdays" in shown and "go out on Tuesdays" not in shown, shown


def test_add_replaces_an_unknown_id_is_one_line(tmp_path):
    db = make_db(tmp_path / "m.db")
    rc, out, err = cli("add", str(db), NEW, "--replaces", "nope", ok=False)
    assert rc != 0 and out == ""
    assert err.strip().endswith("--replaces: no episode with id 'nope'; nothing was written")


# ---- MCP (the SDK's client) ----


def test_mcp_remember_with_replaces(tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    db = make_db(tmp_path / "m.db")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "shop"],
        env={k: v for k, v in env().items() if k in ("PATH", "HOME", "PYTHONPATH", "HF_HUB_OFFLINE",
                                                   "HF_HUB_CACHE", "HF_HOME")},
    )  # fmt: skip

    async def main() -> List[Any]:
        with open(tmp_path / "err.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    bad = await s.call_tool("remember", {"content": NEW, "replaces": "nope"})
                    made = await s.call_tool("remember", {"content": NEW, "replaces": "deploys"})
                    q = {"query": QUESTION, "min_relevance": 0}
                    current = await s.call_tool("recall", q)
                    every = await s.call_tool("recall", dict(q, include_superseded=True))
                    return [bad, made, current, every]

    bad, made, current, every = asyncio.run(main())
    assert bad.is_error and "replaces: no memory with id 'nope'" in bad.content[0].text
    assert not made.is_error, made.content
    new = made.structured_content["id"]
    assert made.structured_content["replaced"] == "deploys"
    ids = [h["id"] for h in current.structured_content["hits"]]
    assert new in ids and "deploys" not in ids and "Tuesdays after" not in current.content[0].text
    old = [h for h in every.structured_content["hits"] if h["id"] == "deploys"]
    assert old and old[0]["replaced_by"] == new  # the agent sees it is out of date
    assert all("replaced_by" not in h for h in current.structured_content["hits"])


# ---- Datasette ----


def test_datasette_recall_leaves_the_replaced_fact_out(tmp_path):
    pytest.importorskip("datasette.app")
    import urllib.parse

    from datasette import app as datasette_app

    db = make_db(tmp_path / "memory.db")
    with Store(db) as s:
        new = s.add(NEW, scope="shop", replaces="deploys")

    async def go(extra: Dict[str, Any]) -> Any:
        ds = datasette_app.Datasette([str(db)], settings={"sql_time_limit_ms": 60_000})
        await ds.invoke_startup()
        q = urllib.parse.urlencode(dict(query=QUESTION, limit=5, _shape="array", **extra))
        return await ds.client.get(f"/memory/recall.json?{q}")

    r = asyncio.run(go({}))
    if r.status_code != 200:
        pytest.skip(f"Datasette cannot load the extension here: {r.text[:200]}")
    ids = [row["id"] for row in r.json()]
    assert new in ids and "deploys" not in ids
    r = asyncio.run(go({"include_superseded": 1}))
    assert r.status_code == 200 and "deploys" in [row["id"] for row in r.json()]


# ---- the likely update ----


@pytest.mark.parametrize(
    "old, new, what",
    [
        (OLD, NEW, "a day"),
        ("The staging cluster has 3 replicas.", "The staging cluster has 5 replicas.", "a number"),
        ("The on-call lead is Priya.", "The on-call lead is Marco.", "a name"),
        ("The user likes tea.", "The user likes tea.", None),
        ("The user likes green tea.", "The user likes black tea.", None),
    ],
)
def test_what_a_new_text_changes(old, new, what):
    assert differs_in_detail(old, new) == what


def test_remember_names_the_memory_a_new_text_may_update(tmp_path):
    """With the real model, through the SDK's client: a changed day is named, with the
    cosine, an unrelated fact is not."""
    pytest.importorskip("mcp.server.mcpserver")
    from conftest import embedding_model

    model = embedding_model()
    if model is None:
        pytest.skip("needs the embedding model (SQLITE_RRF_MODEL)")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    keep = ("PATH", "HOME", "PYTHONPATH")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(tmp_path / "m.db"), "--scope", "shop"],
        env={**{k: v for k, v in os.environ.items() if k in keep}, "SQLITE_RRF_MODEL": model},
    )

    async def main() -> List[Any]:
        with open(tmp_path / "err.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    out = []
                    for text, extra in [
                        (OLD, {"id": "deploys"}),
                        ("Shop deploys go out on Thursdays after the nightly Postgres backup.", {}),
                        ("The user prefers green tea, no sugar.", {}),
                    ]:
                        out.append(await s.call_tool("remember", {"content": text, **extra}))
                    return out

    first, changed, unrelated = asyncio.run(main())
    assert "may_update" not in first.structured_content
    got = changed.structured_content
    assert got["may_update"] == "deploys", got
    assert "this may update 'deploys' (cos 0.9" in got["note"] and "a day" in got["note"]
    assert "replaces='deploys'" in got["note"]
    assert (
        "may_update" not in unrelated.structured_content
        and "note" not in unrelated.structured_content
    )


def test_an_import_line_may_name_the_fact_it_replaces(tmp_path):
    db = make_db(tmp_path / "m.db")
    lines = [
        dict(id="thu", content=NEW, scope="shop", replaces="deploys"),
        dict(id="x", content="Another note.", scope="shop", replaces="nope"),
    ]
    rc, out, err = cli("import", str(db), "-", stdin=json.dumps(lines[1]) + "\n", ok=False)
    assert rc == 1 and "line 1: replaces: no episode with id 'nope'" in err, err
    cli("import", str(db), "-", stdin=json.dumps(lines[0]) + "\n")
    with Store(db) as s:
        assert s.superseded_by("deploys") == "thu" and s.get("x") is None
    assert "deploys" not in recalled(db) and "thu" in recalled(db)
