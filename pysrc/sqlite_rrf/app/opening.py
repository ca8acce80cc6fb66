"""Opening a memory database with the chosen model (``--model``, ``$SQLITE_RRF_MODEL``, the
default; the database's own model only when it is one of these), and where the warm
server's hook socket for it is."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from ..embedding.embedder import Embedder
    from ..store import Store

from .errors import UserError
from .notes import note

#: Where a server's hook socket goes when ``--socket`` is not given: this directory under
#: ``$XDG_RUNTIME_DIR`` (mode 0700), else beside the database.
RUNTIME_SUBDIR = "sqlite-rrf"


def socket_path(db: str) -> str:
    """The hook socket of ``sqlite-rrf serve db`` (the server and the hook compute the
    same path): ``$XDG_RUNTIME_DIR/sqlite-rrf/NAME-CRC.sock`` when the user has a runtime
    directory (NAME: the database's file name, CRC: a checksum of its real path, so two
    databases of one name differ), else ``DB.sock`` beside the database (or, when a file
    of another user is already there, ``$TMPDIR/sqlite-rrf-UID/NAME-CRC.sock``)."""
    from .sockets import beside_or_private, socket_name

    real = os.path.realpath(db)
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if run and os.path.isabs(run) and os.path.isdir(run):
        return os.path.join(run, RUNTIME_SUBDIR, socket_name(real))
    return beside_or_private(real + ".sock", real)


def check_model_args(model: Optional[str], n_ctx: Optional[int]) -> None:
    """Refuse a malformed ``--model`` or ``--n-ctx`` before anything is opened."""
    from ..embedding.models import parse_spec

    if model is not None:
        try:
            parse_spec(model)
        except ValueError as e:
            raise UserError(f"--model: {e}") from None
    if n_ctx is not None and not 8 <= n_ctx <= 1 << 20:
        raise UserError(f"--n-ctx: must be from 8 to {1 << 20} tokens, got {n_ctx}")


def _model_named(model: Optional[str]) -> bool:
    """Whether a model was asked for by name (``--model`` or ``$SQLITE_RRF_MODEL``)."""
    from ..embedding.models import MODEL_ENV

    return bool(model) or bool(os.environ.get(MODEL_ENV, "").strip())


def choose_embedder(
    model: Optional[str] = None,
    n_ctx: Optional[int] = None,
    remembered: Optional[str] = None,
    required: bool = False,
    db: Optional[str] = None,
) -> Optional[Embedder]:
    """The Embedder of the chosen model (``model``, ``$SQLITE_RRF_MODEL``, the default), or
    None when no model is available and none was asked for by name.

    A model named by ``model`` or ``$SQLITE_RRF_MODEL`` that cannot be loaded is a
    :class:`UserError` (so is any failure when ``required``); the default model that
    cannot be had turns the vector list off, and that is said on stderr (:func:`note`: once
    a day per database when ``db`` names the database it is for). The
    database's own model (``remembered``) is never loaded because the database names it;
    for a database made with another model (:func:`sqlite_rrf.embedding.models.foreign_model`) the
    default is used only from the Hugging Face cache, and what to pass is said.
    """
    from ..embedding.embedder import Embedder, EmbeddingError
    from ..embedding.models import (
        DEFAULT_N_CTX,
        ModelNotFoundError,
        foreign_hint,
        foreign_model,
        model_candidates,
        resolve_model,
    )

    foreign = foreign_model(model, remembered)
    first_error: Optional[Exception] = None
    for spec in model_candidates(model, remembered):
        try:
            if foreign:  # the default, not downloaded for a database of another model
                resolve_model(spec, download=False)
            return Embedder(spec, n_ctx=n_ctx or DEFAULT_N_CTX)
        except ValueError as e:  # a malformed hf: name, a bad --n-ctx
            raise UserError(str(e)) from None
        except (ModelNotFoundError, EmbeddingError) as e:
            first_error = first_error or e
            if isinstance(e, EmbeddingError) and "llama-cpp-python" in str(e):
                break  # no other model can load either
    why = foreign_hint(foreign) if foreign else str(first_error)
    if _model_named(model) or required:
        raise UserError(why) from None
    note(f"the vector list is off: {why}", db)
    return None


#: :func:`open_store`'s uses: what the store is opened for.
USES = (None, "write", "recall", "serve")


def _is_file(db: str) -> bool:
    """Whether ``db`` names a file (not ``:memory:``, ``''`` or a ``file:`` URI)."""
    return db not in ("", ":memory:") and not db.startswith("file:")


def created_note(db: str) -> str:
    """What is said on stderr when a command creates the memory ``db`` (``add``,
    ``import``, ``mcp``, ``serve``), so that a mistyped path is seen at once."""
    return f"created a new memory at {os.path.abspath(db)}"


def _remove_new(db: str) -> None:
    """Remove the database file ``db`` this process just created, and its -wal and -shm
    (a command that fails leaves no empty memory behind)."""
    for path in (db, db + "-wal", db + "-shm", db + "-journal"):
        try:
            os.unlink(path)
        except OSError:
            pass


def open_store(
    db: str,
    use: Optional[str] = None,
    *,
    model: Optional[str] = None,
    n_ctx: Optional[int] = None,
    must_exist: bool = True,
    defer_model: bool = False,
) -> Store:
    """Open the memory database ``db`` as a :class:`~sqlite_rrf.store.Store`.

    ``use``: None opens it without a model; ``'write'`` and ``'recall'`` attach the
    chosen model (:func:`choose_embedder`), and a recall of a database that has no
    embeddings loads none; ``'serve'`` (the MCP server, ``sqlite-rrf serve``) is
    ``'write'``, or ``'recall'`` when the file is read-only (said once on stderr).
    ``must_exist``: a file that does not exist is a :class:`UserError` (else it is
    created, and :func:`created_note` is said on stderr; if opening then fails, the new
    file is removed). A write to a read-only file is a :class:`UserError`.
    ``defer_model``: open without the model; :func:`attach_model` attaches it later
    with the same ``use`` (the MCP server answers ``initialize`` before the model
    loads)."""
    if use not in USES:
        raise ValueError(f"use: expected one of {USES}, got {use!r}")
    if must_exist and not os.path.exists(db):
        raise UserError(f"{db}: no such database (create it with `sqlite-rrf init {db}`)")
    creating = _is_file(db) and not os.path.lexists(db)
    try:
        store = _open(db, use, model, n_ctx, defer_model)
    except BaseException:
        if creating and os.path.exists(db):
            _remove_new(db)
        raise
    if creating:
        note(created_note(db))
    return store


def _open(
    db: str, use: Optional[str], model: Optional[str], n_ctx: Optional[int], defer: bool
) -> Store:
    """:func:`open_store`'s work, the file's existence checked."""
    if use == "serve":
        try:
            return _open(db, "write", model, n_ctx, defer)
        except UserError as e:
            if "read-only" not in str(e) or not os.path.exists(db):
                raise
        note(
            f"{db} is read-only: recall works (without touching); remember, update "
            "and forget will fail",
            db,
        )
        return _open(db, "recall", model, n_ctx, defer)

    from ..store import Store

    check_model_args(model, n_ctx)
    store = Store(db)
    try:
        if use == "write" and store.readonly:
            raise UserError(
                f"{db}: the database is read-only ({store.readonly_reason}): nothing can be added"
            )
        if use is not None and not defer:
            attach_model(store, use, model=model, n_ctx=n_ctx)
    except BaseException:
        store.close()
        raise
    return store


def attach_model(
    store: Store, use: str, *, model: Optional[str] = None, n_ctx: Optional[int] = None
) -> None:
    """Attach the chosen model to ``store`` for ``use`` (``'write'``, ``'recall'``;
    ``'serve'`` is ``'recall'`` for a read-only store, else ``'write'``), as
    :func:`open_store` does: a model that cannot be had turns the vector list off (said
    on stderr) unless it was named (a :class:`UserError`)."""
    from ..store import StoreError

    db = store.path
    if use == "serve":
        use = "recall" if store.readonly else "write"
    if use == "recall" and store.dim is None and not model:
        if store.count():
            note(
                "the vector list is off: this database has no embeddings yet "
                f"(`sqlite-rrf embed {db}` adds them)",
                db,
            )
        return
    emb = choose_embedder(model, n_ctx, remembered=store.model, db=db)
    if emb is not None:
        try:
            store.attach_embedder(emb, remember=use == "write")
        except StoreError as e:
            emb.close()
            if _model_named(model):
                raise UserError(str(e)) from None
            from ..embedding.models import foreign_hint, foreign_model

            foreign = foreign_model(None, store.model)
            note(
                f"the vector list is off: {e}" + (f"; {foreign_hint(foreign)}" if foreign else ""),
                db,
            )
    elif use == "write" and store.dim is not None:
        note(
            f"new episodes are stored without embeddings; `sqlite-rrf embed {db}` "
            "adds them once a model is available",
            db,
        )


def close_store(store: Store) -> None:
    """Close ``store`` and its model."""
    emb = getattr(store, "embedder", None)
    try:
        if emb is not None and hasattr(emb, "close"):
            emb.close()
    finally:
        store.close()
