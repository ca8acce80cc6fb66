"""Scopes (issue 23): the shared scope has a name (``shared``, stored as ``''``), and a
recall covers the project's scope and the shared one by default, everywhere (the hook,
MCP, the command line); an explicit scope narrows it. These are the application layer's
rules (pysrc/sqlite_rrf/app.py)."""

from __future__ import annotations

import pytest

from sqlite_rrf.app import (ALL_SCOPES, SHARED_SCOPE, UserError, recall_scopes,
                            scope_name, stored_scope)


def test_the_shared_scope_is_named_shared_and_stored_empty():
    assert SHARED_SCOPE == "shared"
    assert stored_scope("shared") == ""
    assert stored_scope("") == ""
    assert stored_scope("shop") == "shop"
    assert scope_name("") == "shared"
    assert scope_name("shop") == "shop"
    for name in ("", "shop", "a b"):
        assert stored_scope(scope_name(name)) == name


def test_a_recall_covers_the_project_and_the_shared_scope_by_default():
    assert recall_scopes(None, "shop") == ("shop", "")
    assert recall_scopes(None, None) == ("",)
    assert recall_scopes(None, "") == ("",)
    assert recall_scopes(None, "shared") == ("",)
    assert recall_scopes(None, ALL_SCOPES) is None


def test_an_explicit_scope_narrows_the_recall():
    assert recall_scopes("blog", "shop") == ("blog",)
    assert recall_scopes("shop", "shop") == ("shop",)
    assert recall_scopes("shared", "shop") == ("",)
    assert recall_scopes("", "shop") == ("",)
    assert recall_scopes(ALL_SCOPES, "shop") is None


@pytest.mark.parametrize("bad", ['""', "''", ' "" '])
def test_quotes_are_not_a_scope_name(bad):
    for call in (lambda: stored_scope(bad), lambda: recall_scopes(bad, "shop"),
                 lambda: recall_scopes(None, bad)):
        with pytest.raises(UserError) as e:
            call()
        assert "shared" in str(e.value) and "scope" in str(e.value)


def test_every_scope_is_refused_for_a_write():
    with pytest.raises(UserError, match=r"^--scope: '\*' means every scope"):
        stored_scope("*", "--scope")


@pytest.mark.parametrize("bad", [3, ["shop"], None, b"shop"])
def test_a_scope_that_is_not_text_is_refused(bad):
    with pytest.raises(UserError, match=r"^scope: expected a scope's name \(text\)"):
        stored_scope(bad)
    if bad is not None:
        with pytest.raises(UserError, match=r"^scope: expected a scope's name"):
            recall_scopes(bad, "shop")
