"""One set of recall options: :class:`sqlite_rrf.core.options.RecallOptions`.

* The value is frozen, checked when it is made (and when :meth:`RecallOptions.replace`
  makes another), and its check names the field, as ``Store.recall``'s keywords do.
* A field whose default is the statement's is None: no default is written twice.
* ``Store.recall(q, options=o)`` and ``Store.recall(q, **fields)`` return the same rows.
* Every front-end (the command line, the prompt hook and the server's hook, MCP's
  ``recall``) hands ``Store.recall`` one ``RecallOptions``, and for the same input the
  same one: a real Store records what it was given (and recalls as usual).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

from sqlite_rrf import hook
from sqlite_rrf.app.prompt_recall import respond
from sqlite_rrf.cli import build_parser
from sqlite_rrf.cli.recall import recall_and_print
from sqlite_rrf.core.options import FIELDS
from sqlite_rrf.core.relevance import DEFAULT_MIN_RELEVANCE
from sqlite_rrf.core.statements import recall_defaults
from sqlite_rrf.store import RecallOptions, Store, StoreError

NOW = 1_790_000_000_000
DAY = 86_400_000
TEXTS = [
    "We chose SQLite for the agent's memory.",
    "The deploys moved from Tuesdays to Thursdays.",
    "The user prefers pnpm over npm.",
    "Postgres credentials are in the vault, not in the repo.",
    "The shop's checkout uses Stripe.",
    "We chose SQLite for the agent's memory.",  # a copy, in another scope
]


def vec(i: int) -> List[float]:
    rnd = np.random.default_rng(i)
    return [float(x) for x in rnd.normal(size=8)]


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    with Store(path) as st:
        st.add_many(
            [
                dict(
                    content=t,
                    embedding=vec(i),
                    scope=("shop", "", "lab")[i % 3],
                    kind=("fact", "decision")[i % 2],
                    created_at=NOW - (i + 1) * DAY,
                )
                for i, t in enumerate(TEXTS)
            ]
        )
    return path


class RecordingStore(Store):
    """A real Store that records what each recall was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: List[Tuple[Optional[int], Optional[RecallOptions], Dict[str, Any]]] = []

    def recall(
        self, query: str, limit: Optional[int] = None, *, options: Any = None, **fields: Any
    ):  # type: ignore[override]
        self.calls.append((limit, options, fields))
        return super().recall(query, limit, options=options, **fields)

    def only_options(self) -> RecallOptions:
        """The options of the one recall made (given as options, nothing else)."""
        assert len(self.calls) == 1, self.calls
        limit, options, fields = self.calls.pop()
        assert limit is None and fields == {}, (limit, fields)
        assert isinstance(options, RecallOptions)
        return options


# ---- the value ----


def test_the_options_are_frozen_and_replace_makes_a_checked_copy():
    o = RecallOptions(limit=5, scope=["shop", ""])
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.limit = 6  # type: ignore[misc]
    p = o.replace(pool="all")
    assert (p.limit, p.pool, o.pool) == (5, "all", None)
    with pytest.raises(StoreError, match=r"^limit: must be an integer from 1 to"):
        o.replace(limit=0)
    with pytest.raises(TypeError, match="no field 'nope'"):
        o.replace(nope=1)


def test_one_form_per_value_so_equal_options_compare_and_hash_equal():
    a = RecallOptions(scope=["shop", ""], weights={"recency": 0}, qvec=[1.0, 0.0, 0.5])
    b = RecallOptions(
        scope=("shop", ""),
        weights=(None, None, 0, None),
        qvec=np.array([1.0, 0.0, 0.5], dtype=np.float32).tobytes(),
    )
    assert a == b and hash(a) == hash(b)
    assert a.scope == ("shop", "") and a.weights == (None, None, 0, None)
    assert a.params() == b.params()
    assert a != b.replace(scope="shop")


def test_no_default_of_the_statement_is_written_again():
    """Every field the statement has a default for is None here; the rest are the
    recall's own switches (touch, force, topic_gate, time_expressions)."""
    own = {"touch": True, "force": False, "topic_gate": False, "time_expressions": True}
    o = RecallOptions()
    assert {f: getattr(o, f) for f in FIELDS if getattr(o, f) is not None} == own
    d = recall_defaults()
    assert o.params()["limit"] == d["result_limit"]
    assert {k: v for k, v in o.params().items() if k != "limit"} == dict.fromkeys(
        o.params().keys() - {"limit"}
    )


#: (field, a bad value, the start of the message): each check names its field.
BAD: List[Tuple[str, Any, str]] = [
    ("limit", 0, "limit: must be an integer from 1 to 2147483647, got 0"),
    ("limit", True, "limit: must be an integer from 1 to"),
    ("weights", (1, 2), "weights: need 4 values"),
    ("weights", {"speed": 1}, "weights: unknown list(s) ['speed']"),
    ("weights", (1, 1, -1, 1), "weights: recency must be a finite number >= 0, got -1"),
    ("k", -1, "k: must be a finite number >= 0"),
    ("pool", "nearest", "pool: must be one of"),
    ("pool_size", -1, "pool_size: must be an integer from 0 to"),
    ("bm25_limit", 1.5, "bm25_limit: must be an integer from 0 to"),
    ("oversample", 0, "oversample: must be an integer from 1 to 10000, got 0"),
    ("profile", "best", "profile: must be one of"),
    ("alpha", 2, "alpha: must be a number in [0, 1], got 2"),
    ("min_similarity", -2, "min_similarity: must be a number in [-1, 1]"),
    ("time_weight", float("nan"), "time_weight: must be a finite number >= 0"),
    ("min_relevance", 1.5, "min_relevance: must be a number from 0 to 1, got 1.5"),
    ("min_share", -0.1, "min_share: must be a number from 0 to 1"),
    ("now", "today", "now: must be an integer (ms since the epoch)"),
    ("scope", 5, "scope: must be text, a list or tuple of texts"),
    ("scope", [], "scope: an empty list names no scope"),
    ("scope", ["a", "b", "c"], "scope: one recall covers at most 2 scopes"),
    ("kind", 3, "kind: must be text, got int"),
    ("since", 1.5, "since: must be an integer (ms since the epoch)"),
    ("until", "soon", "until: must be an integer (ms since the epoch)"),
    ("qvec", [0.0, 0.0], "qvec: zero vector"),
    ("session", "", "session: must be non-empty text"),
]
#: The fields no check refuses: switches read as true or false.
UNCHECKED = {"collapse", "include_superseded", "touch", "force", "topic_gate", "time_expressions"}


def test_every_field_is_checked_or_a_switch():
    assert {f for f, _, _ in BAD} | UNCHECKED == set(FIELDS)


@pytest.mark.parametrize("field,value,message", BAD, ids=[f"{f}={v!r}" for f, v, _ in BAD])
def test_each_check_names_its_field(db, field, value, message):
    with pytest.raises(StoreError) as made:
        RecallOptions(**{field: value})
    assert str(made.value).startswith(message), str(made.value)
    with Store(db, readonly=True) as st:  # the keyword, as Store.recall always took it
        with pytest.raises(StoreError) as recalled:
            st.recall("sqlite", **{field: value})
    assert str(recalled.value) == str(made.value)


def test_a_keyword_that_is_no_option_is_a_type_error(db):
    with Store(db, readonly=True) as st:
        with pytest.raises(TypeError, match="unexpected keyword argument 'pool_szie'"):
            st.recall("sqlite", pool_szie=10)
        with pytest.raises(TypeError, match="options must be RecallOptions, got dict"):
            st.recall("sqlite", options={"limit": 2})  # type: ignore[arg-type]


# ---- keywords and options: the same rows ----

SETS: List[Dict[str, Any]] = [
    {},
    dict(limit=5, pool="all", profile="rrf"),
    dict(limit=4, collapse=False, weights={"recency": 0}),
    dict(scope=["shop", ""], kind="fact", since=NOW - 5 * DAY, until=NOW),
    dict(limit=6, profile="convex", alpha=0.2, min_similarity=-0.5, min_relevance=0.0),
    dict(pool="quantized", pool_size=3, oversample=2, bm25_limit=2, k=10),
]


@pytest.mark.parametrize("fields", SETS, ids=[",".join(s) or "defaults" for s in SETS])
def test_a_keyword_call_and_an_options_call_give_the_same_rows(db, fields):
    base = dict(touch=False, now=NOW, qvec=vec(99))
    with Store(db, readonly=True) as st:
        by_keywords = st.recall("we chose sqlite memory", **base, **fields)
        options = RecallOptions(**base, **fields)
        by_options = st.recall("we chose sqlite memory", options=options)
        limit = fields.get("limit")
        mixed = st.recall(
            "we chose sqlite memory",
            limit,
            options=options.replace(limit=None, pool="recent"),
            pool=fields.get("pool"),
        )
    assert by_keywords.hits, fields  # the comparison is of something
    assert by_options.hits == by_keywords.hits and by_options.params == by_keywords.params
    assert mixed.hits == by_keywords.hits and mixed.params == by_keywords.params


# ---- the front-ends: one RecallOptions, the same for the same input ----


def cli_options(store: RecordingStore, *argv: str, capsys: Any) -> RecallOptions:
    args = build_parser().parse_args(["recall", str(store.path), "sqlite memory", *argv])
    recall_and_print(store, args)
    capsys.readouterr()
    return store.only_options()


def hook_options(store: RecordingStore, monkeypatch: Any, *argv: str) -> RecallOptions:
    p = argparse.ArgumentParser()
    hook.add_arguments(p, light=True)
    args = p.parse_args([str(store.path), *argv])
    payload = {"session_id": "s1", "prompt": "sqlite memory", "cwd": os.getcwd()}
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(payload).encode())))
    req = hook._request(args)
    respond(store, req)
    return store.only_options()


def mcp_options(store: RecordingStore, **arguments: Any) -> RecallOptions:
    from mcp import Client

    from sqlite_rrf.mcp.build import build_server

    async def main() -> Any:
        async with Client(build_server(store, "shop")) as client:
            return await client.call_tool("recall", {"query": "sqlite memory", **arguments})

    res = asyncio.run(main())
    assert not res.is_error, res.content
    return store.only_options()


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp() * 1000)


def test_the_front_ends_hand_the_store_the_same_options(db, tmp_path, monkeypatch, capsys):
    project = tmp_path / "shop"  # the project's scope, derived from the working directory
    project.mkdir()
    monkeypatch.chdir(project)
    with RecordingStore(db, readonly=True) as st:
        cli = cli_options(
            st, "--limit", "5", "--scope", "shop", "--min-relevance", "0.2", capsys=capsys
        )
        assert (cli.limit, cli.scope, cli.min_relevance, cli.touch) == (5, ("shop",), 0.2, True)
        hooked = hook_options(
            st, monkeypatch, "--limit", "5", "--scope", "shop", "--min-relevance", "0.2"
        )
        assert hooked == cli.replace(session="s1", touch=False)  # the hook touches after it prints
        mcp = mcp_options(st, limit=5, scope="shop", min_relevance=0.2)
        assert mcp == cli.replace(force=True)

        # the filters, the profile and the replaced facts: the command line and MCP
        flags = ("--kind", "fact", "--profile", "rrf", "--include-superseded")
        times = ("--since", "2026-09-01", "--until", "2026-09-20T12:00")
        cli = cli_options(st, "--scope", "shop", *flags, *times, capsys=capsys)
        assert (cli.kind, cli.profile, cli.include_superseded) == ("fact", "rrf", True)
        assert (cli.since, cli.until) == (ms("2026-09-01"), ms("2026-09-20T12:00"))
        mcp = mcp_options(
            st,
            scope="shop",
            kind="fact",
            profile="rrf",
            include_superseded=True,
            since="2026-09-01",
            until="2026-09-20T12:00",
            min_relevance=0,
        )
        assert mcp == cli.replace(force=True, min_relevance=0.0, limit=mcp.limit)

        # each one's defaults: the hook and MCP bind the same statement parameters
        hooked = hook_options(st, monkeypatch)
        mcp = mcp_options(st)
        assert hooked.min_relevance == mcp.min_relevance == DEFAULT_MIN_RELEVANCE
        assert hooked.scope == mcp.scope == ("shop", "")
        assert hooked.params() == mcp.params()
        cli = cli_options(st, capsys=capsys)
        assert cli.min_relevance is None  # the library's: no policy
        assert cli.scope == ("shop", "")
        assert cli.replace(min_relevance=mcp.min_relevance).params() == mcp.params()
