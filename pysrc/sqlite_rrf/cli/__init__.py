"""The ``sqlite-rrf`` command line (also ``python -m sqlite_rrf``).

Commands: ``init``, ``import``, ``add``, ``recall``, ``embed``, ``stats``, ``stopwords``,
``list``, ``get``, ``update``, ``forget``, ``export``, ``vacuum`` (:mod:`.manage`),
``maintain``, ``model``, ``path``, ``sql``, ``knn``, ``demo``, ``eval``, ``serve``, ``mcp``,
``hook``, ``replicate``, ``restore``. Every command that embeds takes
``--model`` (a GGUF path or ``hf:ORG/REPO/FILE.gguf``); without it the model is
``$SQLITE_RRF_MODEL``, else the default (:data:`sqlite_rrf.embedding.models.DEFAULT_MODEL`); the
database's own model is loaded only when it is one of these. Without any model, ``add``, ``import``,
``recall`` and ``demo`` work with the BM25, recency and access lists and say so once.

The modules: :mod:`.parser` (the options of every command), :mod:`.commands` (the
commands on one database), :mod:`.recall`, :mod:`.demo`, :mod:`.manage` (a memory's
life: list, get, update, forget, export, vacuum, stats), :mod:`.common` (what they share).

A command imports what it runs and no more: the parser of every command is built on each
run, from light modules only (:mod:`sqlite_rrf.core.statements` names the pools and
profiles), and the store, numpy, the embedder and the evaluation are imported by the
commands that use them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Optional, Sequence

from ..app import error_message, fault_message
from .common import EXIT_ERROR, EXIT_USAGE, CliError
from .parser import PROFILE_SUMMARIES, Parser, add_model_options, build_parser

# relevance, resources and statements are imported where they are used: `sqlite-rrf hook`
# asking a warm server imports none of them (hook.main)

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "PROFILE_SUMMARIES", "CliError", "build_parser", "main"]


def _known_error(e: Exception) -> Optional[str]:
    """The one-line report of an error the command line expects (bad input; a database,
    extension or model it cannot use), or None for a fault of ours
    (:func:`sqlite_rrf.app.error_message`)."""
    return error_message(e)


def check_time_options(args: object) -> None:
    """A command's ``--since`` and ``--until`` (recall, list, forget, export): each a time
    :func:`sqlite_rrf.app.parse_time` reads, and ``--since`` before ``--until`` (else the
    answer would be empty whatever the memory holds): a :class:`CliError` naming both."""
    since, until = getattr(args, "since", None), getattr(args, "until", None)
    if since is not None and until is not None:
        from ..app import check_time_range

        check_time_range(since, until)


def _mcp_parser() -> Parser:
    """``sqlite-rrf mcp``'s own parser: its options as the full parser has them."""
    from .. import mcp

    p = Parser(prog="sqlite-rrf mcp")
    mcp.add_arguments(p)
    add_model_options(p)
    p.set_defaults(func=mcp.run, command="mcp")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hook"] and not {"-h", "--help"} & set(argv):
        # per prompt: its own small parser, no other command's imports (its --help is
        # the full command line's, below)
        from .. import hook

        return hook.main(argv[1:])
    if argv[:1] and argv[0] in ("ls", "rm", "edit"):  # manage.ALIASES
        from .manage import ALIASES

        argv[0] = ALIASES[argv[0]]
    if argv[:1] == ["mcp"] and not {"-h", "--help"} & set(argv):
        # an agent's host waits for its first answer: the parser of this command only
        # (building every command's costs 0.1 s of CPU); its --help is the full one's
        args = _mcp_parser().parse_args(argv[1:])
    else:
        args = build_parser().parse_args(argv)
    try:
        check_time_options(args)
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"sqlite-rrf: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `sqlite-rrf stats DB --json | head`
        return 0
    except KeyboardInterrupt:
        print("sqlite-rrf: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        where = f"{args.db}: " if getattr(args, "db", None) else ""
        known = _known_error(e)
        if known is not None:
            print(f"sqlite-rrf: {where}{known}", file=sys.stderr)
            return EXIT_ERROR
        if os.environ.get("SQLITE_RRF_DEBUG"):  # a fault of ours: one line, unless asked
            raise
        print(f"sqlite-rrf: {where}{fault_message(e)}", file=sys.stderr)
        return EXIT_ERROR
