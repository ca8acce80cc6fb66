"""What the command line's commands share: their one-line error, the store opened with
the chosen model, the options every command checks the same way."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any, List, Optional

from ..app import UserError, ascii_float, check_model_args, choose_embedder, open_store

EXIT_USAGE = 2
EXIT_ERROR = 1


#: The command line's one-line errors are the application layer's (exit status 1).
CliError = UserError


def embedder_for(
    args: argparse.Namespace, remembered: Optional[str] = None, required: bool = False
) -> Any:
    """The Embedder of the chosen model, or None (:func:`sqlite_rrf.app.choose_embedder`
    with ``--model`` and ``--n-ctx``)."""
    return choose_embedder(
        getattr(args, "model", None),
        getattr(args, "n_ctx", None),
        remembered=remembered,
        required=required,
    )


def check_model_options(args: argparse.Namespace) -> None:
    """Refuse a malformed --model or --n-ctx before anything is opened."""
    check_model_args(getattr(args, "model", None), getattr(args, "n_ctx", None))


def open_db(args: argparse.Namespace, model: Optional[str] = None, must_exist: bool = True) -> Any:
    """Open ``args.db`` (:func:`sqlite_rrf.app.open_store`): ``model`` 'write' or 'recall'
    attaches the model chosen by ``--model`` and ``--n-ctx``."""
    return open_store(
        args.db,
        model,
        model=getattr(args, "model", None),
        n_ctx=getattr(args, "n_ctx", None),
        must_exist=must_exist,
    )


def weights_arg(text: Optional[str]) -> Optional[List[float]]:
    """``--weights B,V,R,A``: four numbers, or None when not given."""
    if text is None:
        return None
    try:
        ws = [ascii_float(x) for x in text.split(",")]
    except ValueError:
        raise CliError(f"--weights: expected four numbers b,v,r,a, got {text!r}") from None
    if len(ws) != 4:
        raise CliError(f"--weights: expected four numbers b,v,r,a, got {len(ws)}")
    return ws
