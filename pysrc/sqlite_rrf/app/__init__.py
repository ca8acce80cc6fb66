"""The application layer every way in shares: the command line (:mod:`sqlite_rrf.cli`),
the prompt hook (:mod:`sqlite_rrf.hook`), MCP (:mod:`sqlite_rrf.mcp`) and the
warm server (:mod:`sqlite_rrf.serve`).

- :func:`open_store`: open a memory database with the chosen model (``--model``,
  ``$SQLITE_RRF_MODEL``, the default; the database's own model only when it is one of
  these), and :func:`choose_embedder`; :func:`attach_model` attaches it later (a
  server that answers before its model loads); :func:`created_note` is what is said
  when a command creates a memory.
- :class:`UserError` and :func:`error_message`: the product's one-line messages for every
  error a user can meet (bad input; a database, extension or model it cannot use),
  SQLite's errors said in words (no library class names); :func:`fault_message` for a
  fault of ours.
- :func:`parse_time` (ISO, ms or "yesterday"), :func:`check_time_range`,
  :func:`ascii_float`, :func:`int_arg`, :func:`float_arg`: the options' values.
- Scopes: :data:`ALL_SCOPES`, :data:`SHARED_SCOPE`, :func:`derive_scope`,
  :func:`recall_scopes` (what a recall covers: by default the project's scope and the
  shared one), :func:`recall_scope`, :func:`write_scope`, :func:`stored_scope`,
  :func:`scope_name`; :func:`server_scope` (a server's default: its git work tree's,
  else the shared scope) and :func:`scope_in_words` (its start-up line).
- Text that cannot forge structure in an agent's context: :func:`flatten`,
  :func:`escape`, :func:`code`.
- :func:`iso_time`, :func:`human_age`: a time for people (ISO 8601 UTC, ``3 days ago``).
- :func:`note`: a note on stderr, once per process; a note about a database's standing
  condition once a day per database (:func:`notes_path` remembers what was said).
- :func:`socket_path`: where ``sqlite-rrf serve`` listens for the hook.

The modules: :mod:`.errors`, :mod:`.notes`, :mod:`.options`, :mod:`.display` (times and
text for people and agents), :mod:`.scopes`, :mod:`.opening` (the store with its model,
the server's socket); every name is offered here.

This package imports only the standard library at module level (the hook's client path
imports it); the store and the model load when :func:`open_store` runs.
"""

from __future__ import annotations

from .display import code, escape, explain_in_words, flatten, human_age, iso_time, ranks_in_words
from .errors import UserError, error_message, fault_message, sqlite_words, without_class_names
from .notes import NOTES_KEPT, ONCE_A_DAY, note, notes_path
from .opening import (
    RUNTIME_SUBDIR,
    USES,
    attach_model,
    check_model_args,
    choose_embedder,
    close_store,
    created_note,
    open_store,
    socket_path,
)
from .options import TIME_FORMS, ascii_float, check_time_range, float_arg, int_arg, parse_time
from .scopes import (
    ALL_SCOPES,
    SHARED_SCOPE,
    derive_scope,
    recall_scope,
    recall_scopes,
    scope_in_words,
    scope_name,
    server_scope,
    stored_scope,
    write_scope,
)

__all__ = [
    "ALL_SCOPES",
    "NOTES_KEPT",
    "ONCE_A_DAY",
    "RUNTIME_SUBDIR",
    "SHARED_SCOPE",
    "TIME_FORMS",
    "USES",
    "UserError",
    "ascii_float",
    "attach_model",
    "check_model_args",
    "check_time_range",
    "choose_embedder",
    "close_store",
    "code",
    "created_note",
    "derive_scope",
    "error_message",
    "escape",
    "explain_in_words",
    "fault_message",
    "flatten",
    "float_arg",
    "human_age",
    "int_arg",
    "iso_time",
    "note",
    "notes_path",
    "open_store",
    "parse_time",
    "ranks_in_words",
    "recall_scope",
    "recall_scopes",
    "scope_in_words",
    "scope_name",
    "server_scope",
    "socket_path",
    "sqlite_words",
    "stored_scope",
    "without_class_names",
    "write_scope",
]
