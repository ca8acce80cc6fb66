"""No duplicates, the latest fact first, the topic gate off.

Through the Store (the command line, the MCP server and the hook have their own tests in
test_cli.py, test_mcp.py and test_hook.py):

* the write path: a text its scope already has (the same after
  :func:`sqlite_rrf.core.dedupe.normalise`) is not stored twice; its episode is refreshed and
  its id returned; other clients' rows (the sqlite3 shell, without the extension) count
  too (migration 0010's ``content_key``, its stale trigger);
* the recall (the statement's fold, :mod:`sqlite_rrf.core.fold`): near-duplicates fill
  one slot, the newest, which says how many it stands for; the freed slots are filled
  from further down; the hits stay in score order (a correction is not moved up: a fact
  stored with ``replaces`` hides the one it replaces, ``superseded_by``);
* the topic gate is off unless asked for.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.store import Store, StoreError

SHELL = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(SHELL is None, reason="the sqlite3 shell is not installed")

DAY = 86_400_000
T0 = 1_700_000_000_000

FACT = "The team's shared password is stored in 1Password."
CORRECTION = "Update: the shared password moved from 1Password to Vault."
QUESTION = "where is the shared password?"
OTHERS = [
    "We chose SQLite for the agent's memory.",
    "The deploy runs on Fridays.",
    "The user prefers dark mode in every editor.",
    "Lunch is at noon.",
    "The VPN password rotates monthly.",
    "Standup is at 9:30 every weekday.",
]


@pytest.fixture(scope="module")
def embedder():
    model = embedding_model()
    if model is None:
        pytest.skip("needs the embedding model")
    from sqlite_rrf.embedding.embedder import Embedder

    e = Embedder(str(model))
    yield e
    e.close()


def shell(db: Path, script: str) -> str:
    """The Debian sqlite3 shell, without the extension."""
    p = subprocess.run(
        [SHELL, "-batch", str(db)], input=script + "\n", text=True, capture_output=True, timeout=60
    )
    assert p.returncode == 0 and not p.stderr, p.stderr
    return p.stdout


def keys_consistent(store: Store) -> None:
    """Every content_key is pending (NULL) or the digest of its row's content."""
    from sqlite_rrf.core.dedupe import content_key

    for rowid, content, key in store.conn.execute(
        "SELECT rowid, content, content_key FROM episodes"
    ):
        assert key is None or key == content_key(content), rowid


# ---- what "the same" means ----


def test_the_same_text_is_nfkc_case_folded_white_space_collapsed():
    from sqlite_rrf.core.dedupe import content_key, normalise

    assert (
        normalise("  The user uses\tFISH shell,\n not bash. ")
        == "the user uses fish shell, not bash."
    )
    assert normalise("ﬁsh") == normalise("FISH")  # NFKC: the ligature
    assert normalise("ＦＩＳＨ") == normalise("fish")  # NFKC: full width
    assert normalise("STRASSE") == normalise("straße")  # case folding, not lower()
    assert normalise(unicodedata.normalize("NFD", "café")) == normalise("CAFÉ")
    assert normalise("fish shell") != normalise("fish shell.")  # punctuation counts
    assert normalise("fish shell") != normalise("fishshell")  # so does a space
    assert content_key("A  b") == content_key("a b") and len(content_key("x")) == 16


# ---- the write path ----


def test_remembering_the_same_text_twice_keeps_one_episode_refreshed(tmp_path):
    with Store(tmp_path / "m.db") as s:
        first = s.add("The user uses fish shell, not bash.", created_at=T0, kind="fact")
        s.add("Something else.", created_at=T0)
        again = s.add(
            "  the user uses FISH shell,\nnot bash. ",
            created_at=T0 + DAY,
            importance="high",
            metadata={"source": "chat"},
        )
        assert again == first
        assert s.count() == 2
        ep = s.get(first)
        assert ep.content == "The user uses fish shell, not bash."  # the text stays
        # the first date stays; the repeat is recorded (confirmed_at) and refreshes the use
        assert (ep.created_at, ep.accessed_at) == (T0, T0 + DAY)
        confirmed = s.conn.execute("SELECT confirmed_at FROM episodes WHERE id = ?", (first,))
        assert confirmed.fetchall()[0][0] == T0 + DAY
        assert ep.importance == "high" and ep.kind == "fact"
        assert ep.metadata == {"source": "chat"}
        # an older re-statement never moves the times back, nor lowers the importance
        assert (
            s.add("The user uses fish shell, not bash.", created_at=T0, importance="low") == first
        )
        ep = s.get(first)
        assert (ep.created_at, ep.importance) == (T0, "high")
        keys_consistent(s)


def test_another_scope_an_explicit_id_or_dedupe_false_store_a_copy(tmp_path):
    with Store(tmp_path / "m.db") as s:
        a = s.add("Deploys happen on Fridays.", scope="shop")
        assert s.add("Deploys happen on Fridays.", scope="blog") != a
        w = s.add_many([{"id": "mine", "content": "deploys happen on fridays.", "scope": "shop"}])
        assert list(w) == ["mine"] and w.repeats == (0,) and w.duplicates == ()
        w = s.add_many([{"content": "Deploys happen on Fridays.", "scope": "shop"}], dedupe=False)
        assert w[0] not in (a, "mine")
        assert s.count() == 4
        # a new text in the scope of an existing one is no duplicate
        assert s.add("Deploys happen on Fridays!", scope="shop") not in (a, "mine")


def test_an_import_of_500_with_106_repeats_says_so(tmp_path):
    texts = [f"memory number {i}: the user likes item {i}" for i in range(394)]
    rng = np.random.default_rng(20)
    repeats = [texts[int(i)].upper() for i in rng.integers(0, 394, 106)]
    batch = [{"content": t} for t in texts + repeats]
    with Store(tmp_path / "m.db") as s:
        w = s.add_many(batch)
        assert len(w) == 500 and s.count() == 394
        assert w.duplicates == tuple(range(394, 500))
        for i in range(394, 500):  # each repeat returns the id of the text it repeats
            assert (
                s.get(w[i]).content == texts[[t.upper() for t in texts].index(batch[i]["content"])]
            )
        # the same import again: every episode is a duplicate, nothing is stored
        w2 = s.add_many(batch)
        assert len(w2.duplicates) == 500 and s.count() == 394 and list(w2) == list(w)


def test_a_duplicate_is_not_embedded_again(tmp_path, embedder):
    class Counting:
        """The real model, counting the texts it embeds."""

        def __init__(self, e):
            self.e, self.texts = e, []
            self.dim, self.model_name = e.dim, e.model_name

        def embed(self, text):
            self.texts.append(text)
            return self.e.embed(text)

        def embed_many(self, texts, progress=None):
            self.texts.extend(texts)
            return self.e.embed_many(texts, progress=False)

    c = Counting(embedder)
    with Store(tmp_path / "m.db", embedder=c) as s:
        s.add("The user uses fish shell, not bash.")
        c.texts.clear()
        s.add_many(
            [
                {"content": "the user uses fish shell, not bash."},
                {"content": "A new fact."},
                {"content": "a new fact."},
            ]
        )
        assert c.texts == ["A new fact."]
        assert s.count() == 2


@needs_shell
def test_rows_of_other_clients_count_and_their_changes_make_the_key_pending(tmp_path):
    db = tmp_path / "m.db"
    with Store(db) as s:
        kept = s.add("Kept by the Store.")
    # the shell, without the extension: an insert (no key), and a change of content
    shell(
        db,
        "INSERT INTO episodes(id, content) VALUES ('sh1', 'Written by the SHELL.');\n"
        f"UPDATE episodes SET content = 'Changed by the shell.' WHERE id = '{kept}';",
    )
    with Store(db) as s:
        assert (
            s.conn.execute("SELECT count(*) FROM episodes WHERE content_key IS NULL").fetchall()[0][
                0
            ]
            == 2
        )
        assert s.add("written by the shell.") == "sh1"
        assert s.add("changed by the shell.") == kept
        assert s.add("Kept by the Store.") not in ("sh1", kept)  # the old text is gone
        assert s.count() == 3
        keys_consistent(s)
        assert (
            s.conn.execute("SELECT count(*) FROM episodes WHERE content_key IS NULL").fetchall()[0][
                0
            ]
            == 0
        )
    # the shell still writes, changes and deletes freely
    shell(
        db,
        "UPDATE episodes SET content = content || ' (edited)';\n"
        "DELETE FROM episodes WHERE id = 'sh1';",
    )
    with Store(db) as s:
        assert s.count() == 2
        s.fill_keys()
        keys_consistent(s)


def test_the_store_keeps_keys_right_through_update_and_upsert(tmp_path):
    with Store(tmp_path / "m.db") as s:
        a = s.add("One text.")
        s.update(a, content="Another   text.")
        s.upsert("A third text.", id="u")
        keys_consistent(s)
        assert s.add("another text.") == a
        assert s.add("a third TEXT.") == "u"
        s.update(a, content="another text. ")  # the same normal form: the key stays right
        keys_consistent(s)
        with pytest.raises(StoreError):
            s.add_many([{"content": "fine"}, {"content": ""}])
        assert s.count() == 2  # nothing of a bad batch is written, not even a refresh


# ---- the recall: one slot per text, the newest fact first ----


def _scenario(s: Store) -> None:
    """Three copies of a fact (with ids of their own, as an import of old memories
    brings them), then its correction, among other memories."""
    for i, t in enumerate(OTHERS):
        s.add(t, created_at=T0 + i)
    s.add_many([{"id": f"copy{i}", "content": FACT, "created_at": T0 + i * DAY} for i in range(3)])
    s.add(CORRECTION, created_at=T0 + 5 * DAY)


@needs_model
@pytest.mark.parametrize("limit", [2, 3, 5])
def test_three_copies_and_a_correction(tmp_path, embedder, limit):
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        _scenario(s)
        hits = s.recall(QUESTION, limit=limit, touch=False)
        assert set([h.content for h in hits][:2]) == {CORRECTION, FACT}
        assert len(hits) == limit  # the freed slots are filled from further down
        (copy,) = [h for h in hits if h.content == FACT]
        assert copy.id == "copy2"  # the newest copy stands for the others
        assert copy.duplicates == 2 and list(copy.duplicate_ids) == ["copy1", "copy0"]
        # one final score per slot, in order: the copies' best fused score
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert copy.score >= copy.fused_score
        # without the fold: the statement's own ranking, the copies first
        raw = s.recall(QUESTION, limit=limit, touch=False, collapse=False)
        assert [h.content for h in raw][:2] == [FACT, FACT]
        assert copy.score == max(h.score for h in raw if h.content == FACT)
        # the correction stored as replacing the copies: they are never shown
        s.conn.execute(
            "UPDATE episodes SET superseded_by = (SELECT id FROM episodes WHERE content = ?) "
            "WHERE content = ?",
            (CORRECTION, FACT),
        )
        hits = s.recall(QUESTION, limit=limit, touch=False)
        assert hits[0].content == CORRECTION and FACT not in [h.content for h in hits]


@needs_model
def test_remembered_twice_then_corrected(tmp_path, embedder):
    """The issue's case through add: the second add is the first episode, refreshed; the
    correction, once it replaces the fact, is the only one shown, with limit 1, 2 or 3."""
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        for i, t in enumerate(OTHERS):
            s.add(t, created_at=T0 + i)
        a = s.add("The password is in 1Password.", created_at=T0)
        assert s.add("The password is in 1Password.", created_at=T0 + DAY) == a
        fix = s.add(
            "Update: the password is now in Vault, not in 1Password.", created_at=T0 + 2 * DAY
        )
        both = [h.id for h in s.recall("where is the password?", limit=2, touch=False)]
        assert set(both) == {fix, a}  # in score order, the correction not moved up
        s.conn.execute("UPDATE episodes SET superseded_by = ? WHERE id = ?", (fix, a))
        for limit in (1, 2, 3):
            hits = s.recall("where is the password?", limit=limit, touch=False)
            assert hits[0].id == fix and a not in [h.id for h in hits], [h.content for h in hits]


@needs_model
def test_near_duplicates_collapse_but_a_changed_number_does_not(tmp_path, embedder):
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        for i, t in enumerate(OTHERS):
            s.add(t, created_at=T0 + i)
        old = s.add("The user uses fish shell, not bash.", created_at=T0, scope="a")
        new = s.add(
            "The user uses the fish shell rather than bash.", created_at=T0 + DAY, scope="b"
        )
        hits = s.recall("what shell does the user use?", limit=3, touch=False)
        assert hits[0].id == new and hits[0].duplicate_ids == (old,)
        assert old not in [h.id for h in hits]
        a = s.add("I have 3 cats.", created_at=T0)
        b = s.add("I now have 4 cats.", created_at=T0 + DAY)
        hits = s.recall("how many cats do I have?", limit=3, touch=False)
        assert set([h.id for h in hits][:2]) == {a, b}  # both shown, in score order
        assert hits[0].duplicates == 0 and hits[1].duplicates == 0


@needs_model
def test_a_near_copy_that_adds_a_number_is_no_duplicate(tmp_path, embedder):
    """Two turns of LongMemEval's dev half (cosine 0.98): one has the answer (25:50), the
    other not; collapsing them into the newer would hide the answer."""
    with_time = (
        "I'm training for another charity 5K run coming up and I was wondering if "
        "you could give me some tips on how to improve my endurance. By the way, "
        "I'm hoping to beat my personal best time of 25:50 this time around."
    )
    without = (
        "I'm getting ready for a charity 5K run and I was wondering if you could give "
        "me some tips on how to improve my endurance. By the way, I'm hoping to beat "
        "my personal best time this time around."
    )
    assert float(embedder.embed(with_time) @ embedder.embed(without)) >= 0.95
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        for i, t in enumerate(OTHERS):
            s.add(t, created_at=T0 + i)
        a = s.add(with_time, created_at=T0)
        b = s.add(without, created_at=T0 + DAY)
        ids = [
            h.id
            for h in s.recall(
                "What was my personal best time in the charity 5K run?", limit=3, touch=False
            )
        ]
        assert {a, b} <= set(ids)


@needs_model
def test_a_note_about_another_thing_never_goes_first(tmp_path, embedder):
    """About the same painter, newer, close in score: not a correction, because it lacks
    the painting the question names."""
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        for i, t in enumerate(OTHERS):
            s.add(t, created_at=T0 + i)
        starry = s.add(
            "In The Starry Night, Van Gogh used deep blues and swirling yellows.", created_at=T0
        )
        cafe = s.add("In The Night Café, Van Gogh used blood red and green.", created_at=T0 + DAY)
        q = "Which colors did Van Gogh use in the painting The Starry Night?"
        assert [h.id for h in s.recall(q, limit=2, touch=False)] == [starry, cafe]


def test_collapse_without_a_model_same_text_in_two_scopes(tmp_path):
    with Store(tmp_path / "m.db") as s:
        for i, t in enumerate(OTHERS):
            s.add(t, created_at=T0 + i)
        ids = [
            s.add("The user uses fish shell, not bash.", created_at=T0 + i * DAY, scope=sc)
            for i, sc in enumerate(["a", "b", "c"])
        ]
        hits = s.recall("what shell does the user use? fish or bash", limit=3, touch=False)
        assert [h.content for h in hits].count("The user uses fish shell, not bash.") == 1
        assert hits[0].id == ids[2] and set(hits[0].duplicate_ids) == set(ids[:2])
        assert len(hits) == 3


def test_unrelated_hits_keep_their_order(tmp_path):
    """Hits about different things are never reordered by age."""
    with Store(tmp_path / "m.db") as s:
        for i, t in enumerate(
            [
                "postgres credentials live in the vault",
                "the deploy pipeline runs tests first",
                "lunch with the team on fridays",
            ]
        ):
            s.add(t, created_at=T0 + (3 - i) * DAY)
        for q in ("postgres vault credentials", "deploy pipeline tests", "team lunch"):
            a = [h.id for h in s.recall(q, limit=3, touch=False)]
            b = [h.id for h in s.recall(q, limit=3, touch=False, collapse=False)]
            assert a == b


# ---- the topic gate ----


@needs_model
def test_the_topic_gate_is_off_unless_asked_for(tmp_path, embedder):
    q1 = "Which colors did Van Gogh use in the painting The Starry Night?"
    q2 = "Which colors did Van Gogh use in the painting The Night Café?"
    assert float(embedder.embed(q1) @ embedder.embed(q2)) > 0.85  # the gate's threshold
    with Store(tmp_path / "m.db", embedder=embedder) as s:
        s.add("In The Starry Night, Van Gogh used deep blues and swirling yellows.")
        s.add("In The Night Café, Van Gogh used blood red and green.")
        for session in (None, "agent-1"):
            r1 = s.recall(q1, session=session)
            r2 = s.recall(q2, session=session)
            assert not r1.skipped and not r2.skipped
            assert "Night Café" in r2[0].content
        # asked for, it holds the follow-up back
        s.recall(q1, session="agent-2", topic_gate=True)
        held = s.recall(q2, session="agent-2", topic_gate=True)
        assert held.skipped and len(held) == 0 and "force" in held.reason
        assert not s.recall(q2, session="agent-2", topic_gate=True, force=True).skipped
