"""``sqlite-rrf hook DB``: an agent's prompt hook.

An agent runs its prompt hook once per user prompt, passing JSON on stdin: at least
``{"session_id": …, "prompt": …, "cwd": …}`` (Claude Code's ``UserPromptSubmit`` shape;
other fields are ignored). The hook recalls for the prompt and prints the recollection as
short Markdown on stdout, which the agent adds to the model's context.

Requirements (tests/test_hook.py cites them):

H1. The scope is ``--scope`` when given, else derived from the payload's ``cwd`` (the
    process's working directory when the payload has none) by :func:`derive_scope`: the
    name of the enclosing git work tree's top directory (the nearest directory, going up,
    that holds a ``.git`` entry), else of the directory itself, its control characters
    (a line break in a directory's name) made spaces. ``--scope ''`` is the
    shared memory and ``--scope '*'`` (:data:`ALL_SCOPES`) recalls every scope.
H2. The topic gate is off unless ``--topic-gate`` turns it on (a cosine above 0.85 does not
    mean the same question: a follow-up about another painting can have 0.96). When on,
    it is keyed by the payload's ``session_id``: a prompt on the same topic as the
    session's previous recalled prompt (cosine > 0.85, with a model) prints nothing.
    Without a ``session_id`` nothing is gated.
H3. The hits are touched (the agent was shown them), and the session's query is
    remembered in ``rrf_meta`` (``topic_gate:<session_id>``).
H4. The output is short Markdown: one header line and one bullet per hit, each episode's
    text on one line, cut at ``--max-chars``. Nothing at all is printed when nothing
    matched or the gate held the recall back, or for a blank prompt.
H4a. Nothing from a memory (text, id, scope) forges structure in the output, whoever wrote
    it (the sqlite3 shell too): line breaks and every other control character become
    spaces (:func:`flatten`), and ``<``, ``>`` and an ``&`` that starts a character
    reference are written ``&lt;``, ``&gt;``, ``&amp;`` (:func:`escape`), so no text
    reads as a tag (``</context>``, ``<system-reminder>``) or starts a line of its own;
    ids and scopes are code spans that no backtick in them can close (:func:`code`).
H4b. Nothing is printed unless a hit's relevance (:mod:`sqlite_rrf.relevance`) reaches
    ``--min-relevance`` (default :data:`~sqlite_rrf.relevance.DEFAULT_MIN_RELEVANCE`), so a
    prompt about nothing in the memory ("hi", "thanks") prints nothing.
H5. The exit status is 0 whatever happens: on any fault (bad JSON, no prompt, no such
    database, bad options) one line goes to stderr, starting with ``sqlite-rrf hook:``,
    and nothing to stdout, so a hook never blocks the agent (for Claude Code, exit status
    2 would block the prompt). A model named by ``--model`` or ``$SQLITE_RRF_MODEL`` that
    cannot be used is said in one line too, and the recall goes on without the vector
    list.
H6. It stays fast: this module imports only the standard library at module level; the
    store and the model load when the hook runs, and no model is loaded for a database
    that has no embeddings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Dict, List, NoReturn, Optional

from .app import (ALL_SCOPES, UserError, code, derive_scope, error_message, escape,
                  fault_message, flatten, open_store)

#: ``--max-chars``'s default: each recalled episode's text is cut at this many characters.
DEFAULT_MAX_CHARS = 400

_PREFIX = "sqlite-rrf hook"


class HookFault(UserError):
    """A fault of the hook's input, said as one line on stderr."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The hook's arguments (cli.py adds --model and --n-ctx)."""
    p.add_argument("db", help="the memory database (it must exist)")
    p.add_argument("--scope", help="recall only this scope ('' is the shared memory, '*' "
                   "every scope); default: derived from the payload's cwd, the name of its "
                   "git work tree's top directory, else of the directory")
    from .app import int_arg
    from .statements import recall_defaults

    limit = recall_defaults()["result_limit"]
    p.add_argument("--limit", type=int_arg, default=limit, metavar="N",
                   help=f"how many episodes, 1 to 100 (default {limit}, the recall's)")
    p.add_argument("--max-chars", type=int_arg, default=DEFAULT_MAX_CHARS, dest="max_chars",
                   metavar="N",
                   help=f"cut each episode's text at this many characters (default "
                        f"{DEFAULT_MAX_CHARS}; 0: never)")
    p.add_argument("--topic-gate", action="store_true", dest="topic_gate",
                   help="print nothing for a prompt whose embedding has cosine > 0.85 with "
                        "the session's previous prompt (off by default: such a prompt can "
                        "still ask something else)")
    from .relevance import DEFAULT_MIN_RELEVANCE

    from .app import float_arg

    p.add_argument("--min-relevance", type=float_arg, default=DEFAULT_MIN_RELEVANCE,
                   dest="min_relevance", metavar="R",
                   help=f"print nothing unless an episode's relevance (0 to 1, the same "
                        f"scale for every prompt) is at least R (default "
                        f"{DEFAULT_MIN_RELEVANCE:g}; 0: always print)")
    _quiet_usage_errors(p)


def _quiet_usage_errors(p: argparse.ArgumentParser) -> None:
    """Bad or unknown options are a fault like any other (H5): one line, exit 0. argparse
    would exit with status 2, which Claude Code takes as "block this prompt"."""
    def error(message: str) -> NoReturn:
        _say(f"{message} (see sqlite-rrf hook --help)")
        raise SystemExit(0)

    parse_known = p.parse_known_args

    def parse_known_args(args: Any = None, namespace: Any = None) -> Any:
        ns, extra = parse_known(args, namespace)
        if extra:  # the main parser would refuse them with status 2
            error(f"unrecognized arguments: {' '.join(extra)}")
        return ns, extra

    p.error = error  # type: ignore[method-assign]
    p.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _say(message: str) -> None:
    """One line on stderr (H5)."""
    line = " ".join(str(message).split())
    try:
        print(f"{_PREFIX}: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def read_payload(stream: Any = None) -> Dict[str, Any]:
    """The hook's JSON object from ``stream`` (default: stdin's bytes)."""
    stream = stream if stream is not None else sys.stdin
    if stream is None:
        raise HookFault("stdin: closed; expected the hook's JSON")
    if stream.isatty():
        raise HookFault("stdin: expected the hook's JSON, e.g. echo '{\"prompt\": \"…\"}' "
                        "| sqlite-rrf hook DB")
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HookFault(f"stdin: not valid UTF-8 (byte {e.object[e.start]:#04x} at "
                            f"offset {e.start})") from None
    if not raw.strip():
        raise HookFault("stdin: empty; expected the hook's JSON ({\"prompt\": …})")
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as e:
        raise HookFault(f"stdin: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})"
                        ) from None
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise HookFault(f"stdin: invalid JSON ({why})") from None
    if not isinstance(payload, dict):
        raise HookFault(f"stdin: expected a JSON object, got {type(payload).__name__}")
    return payload


def _age(ms: Any, now_ms: int) -> str:
    if isinstance(ms, bool) or not isinstance(ms, int):  # another client wrote a non-integer
        return "at an unknown time"
    s = max(0, (now_ms - ms) // 1000)
    if s < 90:
        return "just now"
    if s < 90 * 60:
        return f"{round(s / 60)} minutes ago"
    if s < 36 * 3600:
        return f"{round(s / 3600)} hours ago"
    if s < 60 * 86400:
        return f"{round(s / 86400)} days ago"
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def render(hits: List[Any], scope: Optional[str], max_chars: int,
           now_ms: Optional[int] = None) -> str:
    """The recollection as Markdown (H4): a header and one bullet per hit."""
    if not hits:
        return ""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    where = "every scope" if scope is None else (f"scope {code(scope)}" if scope else
                                                 "the shared scope")
    lines = [f"Recalled from memory (sqlite-rrf, {where}); may be outdated:"]
    for h in hits:  # H4a: nothing from the memory leaves its line or reads as a tag
        text = flatten(str(h.content))
        if max_chars and len(text) > max_chars:
            text = text[:max_chars].rstrip() + " …"
        mark = ", important" if h.importance == "high" else ""
        lines.append(f"- {escape(text)} _(id {code(str(h.id))}, "
                     f"{_age(h.created_at, now_ms)}{mark})_")
    return "\n".join(lines) + "\n"


def _describe(e: BaseException, db: str) -> str:
    """The one line for a fault, in the command line's words (:mod:`sqlite_rrf.app`)."""
    if isinstance(e, UserError):
        return str(e)
    known = error_message(e)
    if known is not None:
        return f"{db}: {known}"
    if isinstance(e, ValueError):
        return f"{db}: {e}"
    return f"{db}: {fault_message(e)}"


def run(args: argparse.Namespace) -> int:
    """The hook: read the payload, recall, print Markdown; exit status 0 always (H5)."""
    try:
        out = _recall(args)
    except KeyboardInterrupt:
        _say("interrupted")
        return 0
    except Exception as e:
        if os.environ.get("SQLITE_RRF_DEBUG"):
            import traceback

            traceback.print_exc()
        _say(_describe(e, getattr(args, "db", "")))
        return 0
    if out:
        try:
            sys.stdout.write(out)
            sys.stdout.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
    return 0


def _recall(args: argparse.Namespace) -> str:
    if not 1 <= args.limit <= 100:
        raise HookFault(f"--limit: must be from 1 to 100, got {args.limit}")
    if args.max_chars < 0:
        raise HookFault(f"--max-chars: must be 0 or more, got {args.max_chars}")
    min_relevance = getattr(args, "min_relevance", None)
    if min_relevance is not None and not 0 <= min_relevance <= 1:
        raise HookFault(f"--min-relevance: must be a number from 0 to 1, got {min_relevance}")
    payload = read_payload()
    prompt = payload.get("prompt")
    if prompt is None:
        raise HookFault("stdin: the JSON has no \"prompt\" (expected "
                        "{\"session_id\": …, \"prompt\": …, \"cwd\": …})")
    if not isinstance(prompt, str):
        raise HookFault(f"stdin: \"prompt\" must be text, got {type(prompt).__name__}")
    if not prompt.strip():
        return ""
    session = payload.get("session_id")
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        session = None
    if args.scope is not None:
        scope: Optional[str] = args.scope
    else:
        cwd = payload.get("cwd")
        scope = derive_scope(cwd if isinstance(cwd, str) and cwd else None)
    store_scope = None if scope == ALL_SCOPES else scope
    try:
        store = open_store(args.db, "recall", model=getattr(args, "model", None),
                           n_ctx=getattr(args, "n_ctx", None))
    except UserError as e:
        if not os.path.exists(args.db):
            raise
        # a model named by --model or $SQLITE_RRF_MODEL that cannot be used: say so, and
        # recall with the other lists rather than not at all (H5)
        from .store import Store

        _say(f"{e}; recalling without the vector list")
        store = Store(args.db)
    with store:
        result = store.recall(prompt, limit=args.limit, scope=store_scope, session=session,
                              topic_gate=getattr(args, "topic_gate", False),
                              min_relevance=min_relevance)
    return render(list(result), store_scope, args.max_chars)
