"""Scopes: which memory an episode belongs to (a project's, or the shared one) and which
scopes a recall covers (by default the project's and the shared one)."""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple

from .display import flatten
from .errors import UserError

#: The scope value (hook, MCP, server) that recalls every scope.
ALL_SCOPES = "*"

#: The public name of the shared scope: the memories (the user's preferences, facts true
#: everywhere) that every project's recall includes by default. It is stored as ``''``;
#: every way in takes ``shared`` or ``''`` for it, and output shows it as ``shared``.
SHARED_SCOPE = "shared"


def derive_scope(cwd: Optional[str] = None) -> str:
    """The scope of a working directory: the name of the top directory of the git work
    tree that holds ``cwd`` (the nearest directory, going up, with a ``.git`` entry: a
    directory, or the file of a worktree or submodule), else the name of ``cwd`` itself;
    ``''`` for the root directory. ``cwd`` defaults to the process's. Its control
    characters (a line break in a directory's name) are made spaces."""
    path = os.path.abspath(cwd if cwd else os.getcwd())
    d = path
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return flatten(os.path.basename(d))
        parent = os.path.dirname(d)
        if parent == d:
            return flatten(os.path.basename(path))
        d = parent


def _git_top(path: str) -> Optional[str]:
    """The top directory of the git work tree holding ``path`` (the nearest directory,
    going up, with a ``.git`` entry), or None."""
    d = path
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def server_scope(cwd: Optional[str] = None) -> str:
    """The default scope of a server started in ``cwd`` (the process's by default) without
    ``--scope`` (``sqlite-rrf serve``, ``sqlite-rrf mcp``): its project's, the name of
    the top directory of the git work tree that holds ``cwd`` (as :func:`derive_scope`
    says it); outside a project the shared scope ``''``. Outside a project means: in no
    git work tree, or in the home directory's own (a repository of dotfiles), or in the
    home directory itself. So a server started from ``$HOME`` (a systemd user unit)
    remembers into the memory every project's recall reads, not into a scope named
    after the user that no project's hook reads."""
    path = os.path.abspath(cwd if cwd else os.getcwd())
    top = _git_top(path)
    home = os.path.expanduser("~")
    homes = {os.path.realpath(home)} if os.path.isabs(home) else set()
    if top is None or os.path.realpath(top) in homes or os.path.realpath(path) in homes:
        return ""
    return flatten(os.path.basename(top))


def scope_in_words(scope: str, given: bool) -> str:
    """A server's default scope as its start-up line says it: ``default scope 'shop'
    (this git work tree's)``, ``... 'shared' (outside a project: ...)``, ``... (--scope)``."""
    if scope == ALL_SCOPES:
        return (
            f"default scope {ALL_SCOPES!r} (--scope: recall covers every scope, "
            f"remember saves to {SHARED_SCOPE!r})"
        )
    shown = repr(scope_name(scope))
    if given:
        return f"default scope {shown} (--scope)"
    if scope == "":
        return (
            f"default scope {shown} (outside a git work tree: remember saves to the memory "
            "every project's recall reads; --scope NAME serves one project's)"
        )
    return f"default scope {shown} (this git work tree's)"


def recall_scope(scope: Optional[str]) -> Optional[str]:
    """The store's ``scope=`` for a recall of ``scope``: None (every scope) for
    :data:`ALL_SCOPES` and None, else ``scope``."""
    return None if scope is None or scope == ALL_SCOPES else scope


def write_scope(scope: str, option: str = "scope") -> str:
    """``scope`` as the scope an episode is written to; :data:`ALL_SCOPES` is refused
    (a :class:`UserError` naming ``option``): an episode belongs to one scope."""
    if scope == ALL_SCOPES:
        raise UserError(
            f"{option}: {ALL_SCOPES!r} means every scope in a recall; an "
            f"episode belongs to one scope ({SHARED_SCOPE!r} is the shared "
            "memory)"
        )
    return scope


#: Scope names that are quoting, not a name (``'""'`` from a client that cannot pass an
#: empty string): refused, so that no scope named ``""`` is made by accident.
_QUOTES_ONLY = re.compile(r"""\s*(?:""|'')\s*""")


def _scope_text(scope: Any, option: str) -> str:
    """``scope`` checked to be a scope's name (a str, not quoting only)."""
    if not isinstance(scope, str):
        raise UserError(
            f"{option}: expected a scope's name (text), got {type(scope).__name__} {scope!r}"
        )
    if _QUOTES_ONLY.fullmatch(scope):
        raise UserError(
            f"{option}: {scope!r} is quotes, not a scope's name; the shared "
            f"scope is named {SHARED_SCOPE!r} (or pass an empty string)"
        )
    return scope


def scope_name(stored: str) -> str:
    """The name shown for the stored scope ``stored``: :data:`SHARED_SCOPE` for ``''``,
    else ``stored`` itself."""
    return SHARED_SCOPE if stored == "" else stored


def stored_scope(name: str, option: str = "scope") -> str:
    """The stored scope an episode is written to for the scope ``name`` a user gave:
    ``''`` for :data:`SHARED_SCOPE` and ``''``, else ``name``. Refused (a
    :class:`UserError` naming ``option``): :data:`ALL_SCOPES` (an episode belongs to one
    scope, :func:`write_scope`), a value that is not text, and quotes only (``'""'``)."""
    name = write_scope(_scope_text(name, option), option)
    return "" if name == SHARED_SCOPE else name


def recall_scopes(
    scope: Optional[str], project: Optional[str], option: str = "scope"
) -> Optional[Tuple[str, ...]]:
    """The stored scopes a recall covers, for the ``scope`` a user gave and the
    ``project``'s scope (:func:`derive_scope` of the working directory, or a server's
    ``--scope``):

    - ``scope`` None (not given): the project's scope and the shared one,
      ``(project, '')``; ``('',)`` when ``project`` is None or names the shared scope;
      None when ``project`` is :data:`ALL_SCOPES` (a server started for every scope);
    - :data:`ALL_SCOPES`: None (every scope);
    - :data:`SHARED_SCOPE` or ``''``: ``('',)``, the shared scope only;
    - any other name: ``(scope,)``, that scope only (an explicit scope narrows the
      recall).

    The result is what :meth:`sqlite_rrf.store.Store.recall` takes as ``scope=``. A
    ``scope`` that is not text, or quotes only (``'""'``), is a :class:`UserError`
    naming ``option``."""
    if scope is None:
        if project is None:
            return ("",)
        if project == ALL_SCOPES:
            return None
        proj = "" if project == SHARED_SCOPE else _scope_text(project, "project scope")
        return ("",) if proj == "" else (proj, "")
    scope = _scope_text(scope, option)
    if scope == ALL_SCOPES:
        return None
    return ("",) if scope in (SHARED_SCOPE, "") else (scope,)
