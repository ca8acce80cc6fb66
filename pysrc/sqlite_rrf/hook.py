"""``sqlite-rrf hook DB``: an agent's prompt hook.

An agent runs its prompt hook once per user prompt, passing JSON on stdin: at least
``{"session_id": …, "prompt": …, "cwd": …}`` (Claude Code's ``UserPromptSubmit`` shape;
other fields are ignored). The hook recalls for the prompt and prints the recollection as
short Markdown on stdout, which the agent adds to the model's context.

Requirements (tests/test_hook.py cites them):

H1. The recall covers the project's scope and the shared one (``shared``, stored as
    ``''``), in one ranking (:func:`sqlite_rrf.app.recall_scopes`). The project's scope
    is derived from the payload's ``cwd`` (the process's working directory when the
    payload has none) by :func:`derive_scope`: the name of the enclosing git work tree's
    top directory (the nearest directory, going up, that holds a ``.git`` entry), else of
    the directory itself, its control characters (a line break in a directory's name)
    made spaces. ``--scope NAME`` narrows the recall to that one scope, ``--scope
    shared`` (or ``''``) to the shared memory, and ``--scope '*'`` (:data:`ALL_SCOPES`)
    recalls every scope. The header says what was recalled ("scope `shop` and the shared
    scope").
H2. The topic gate is off unless ``--topic-gate`` turns it on (a cosine above 0.85 does not
    mean the same question: a follow-up about another painting can have 0.96). When on,
    it is keyed by the payload's ``session_id``: a prompt on the same topic as the
    session's previous recalled prompt (cosine > 0.85, with a model) prints nothing.
    Without a ``session_id`` nothing is gated.
H3. The hits are touched (the agent was shown them), and the session's query is
    remembered in ``rrf_meta`` (``topic_gate:<session_id>``).
H4. The output is short Markdown: one header line and one bullet per hit, each episode's
    text on one line, cut at ``--max-chars``. Nothing at all is printed when nothing
    matched or the gate held the recall back, or for a blank prompt. A hit that stands
    for near-duplicates (:mod:`sqlite_rrf.diversify`) says how many.
H4b. Nothing is printed unless a hit's relevance (:mod:`sqlite_rrf.relevance`) reaches
    ``--min-relevance`` (default :data:`~sqlite_rrf.relevance.DEFAULT_MIN_RELEVANCE`), so a
    prompt about nothing in the memory ("hi", "thanks") prints nothing.
H4a. Nothing from a memory (text, id, scope) forges structure in the output, whoever wrote
    it (the sqlite3 shell too): line breaks and every other control character become
    spaces (:func:`flatten`), and ``<``, ``>`` and an ``&`` that starts a character
    reference are written ``&lt;``, ``&gt;``, ``&amp;`` (:func:`escape`), so no text
    reads as a tag (``</context>``, ``<system-reminder>``) or starts a line of its own;
    ids and scopes are code spans that no backtick in them can close (:func:`code`).
H5. The exit status is 0 whatever happens: on any fault (bad JSON, no prompt, no such
    database, bad options) one line goes to stderr, starting with ``sqlite-rrf hook:``,
    and nothing to stdout, so a hook never blocks the agent (for Claude Code, exit status
    2 would block the prompt). A model named by ``--model`` or ``$SQLITE_RRF_MODEL`` that
    cannot be used is said in one line too, and the recall goes on without the vector
    list.
H6. It stays fast: this module imports only the standard library at module level; the
    store and the model load when the hook runs, and no model is loaded for a database
    that has no embeddings.
H7. A warm server (``sqlite-rrf serve DB``, :mod:`sqlite_rrf.server`) answers when one
    listens at ``--socket`` (default :func:`sqlite_rrf.app.socket_path`) and the socket is
    owned by the hook's user; the output is the same as in process. Without one (no
    socket, a stale one, a server killed mid-call, a server of another database, no
    answer within :data:`SERVER_TIMEOUT` seconds) the hook recalls in its own process, as
    it does with ``--no-server``. The hook's own process then imports no store, numpy or
    model when the server answers.
H8. The output is bounded: each episode's text is cut at ``--max-chars`` and the whole at
    ``--max-total`` characters (default :data:`DEFAULT_MAX_TOTAL`; agent hosts show
    only a preview of longer hook output): the bullets that do not fit are left out
    and a last line says how many. ``--format json`` prints
    ``{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext":
    MARKDOWN}}`` (Claude Code's structured form) instead of the Markdown; nothing at all
    when there is nothing to say.
H9. The hook prints before it touches: the hits are marked accessed after the output is
    written (best effort, :meth:`sqlite_rrf.store.Store.touch`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time (H6)
if TYPE_CHECKING:
    from typing import Any, Dict, List, NoReturn, Optional

from .app import (UserError, code, derive_scope, error_message, escape, fault_message,
                  flatten, open_store, recall_scopes)
from .app import ALL_SCOPES, SHARED_SCOPE  # noqa: F401 (the hook's names for them)

#: ``--max-chars``'s default: each recalled episode's text is cut at this many characters.
DEFAULT_MAX_CHARS = 400
#: ``--max-total``'s default: the whole output is at most this many characters (H8).
DEFAULT_MAX_TOTAL = 6000
#: ``--format``'s choices (H8).
FORMATS = ("markdown", "json")
#: How long the hook waits for a server's answer (seconds) before it recalls itself (H7).
SERVER_TIMEOUT = 5.0

_PREFIX = "sqlite-rrf hook"


class HookFault(UserError):
    """A fault of the hook's input, said as one line on stderr."""


def add_arguments(p: argparse.ArgumentParser, light: bool = False) -> None:
    """The hook's arguments (cli.py adds --model and --n-ctx). ``light``: the defaults of
    ``--limit`` and ``--min-relevance`` are left to whoever recalls (:func:`respond`), so
    the parser reads neither the statement nor the relevance model (:func:`main`)."""
    p.add_argument("db", help="the memory database (it must exist)")
    p.add_argument("--scope", help="recall only this scope ('shared' or '' is the shared "
                   "memory, '*' every scope); default: the project's scope and the shared "
                   "one, the project's derived from the payload's cwd (the name of its git "
                   "work tree's top directory, else of the directory)")
    from .app import int_arg

    if light:
        p.add_argument("--limit", type=int_arg, default=argparse.SUPPRESS, metavar="N")
    else:
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
    from .app import float_arg

    if light:
        p.add_argument("--min-relevance", type=float_arg, default=argparse.SUPPRESS,
                       dest="min_relevance", metavar="R")
    else:
        from .relevance import DEFAULT_MIN_RELEVANCE

        p.add_argument("--min-relevance", type=float_arg, default=DEFAULT_MIN_RELEVANCE,
                       dest="min_relevance", metavar="R",
                       help=f"print nothing unless an episode's relevance (0 to 1, the same "
                            f"scale for every prompt) is at least R (default "
                            f"{DEFAULT_MIN_RELEVANCE:g}; 0: always print)")
    p.add_argument("--max-total", type=int_arg, default=DEFAULT_MAX_TOTAL, dest="max_total",
                   metavar="N",
                   help=f"print at most N characters in all: the episodes that do not fit "
                        f"are left out, and a last line says how many (default "
                        f"{DEFAULT_MAX_TOTAL}; 0: no cap)")
    p.add_argument("--format", choices=FORMATS, default="markdown",
                   help="markdown (default), or json: Claude Code's {\"hookSpecificOutput\": "
                        "{\"hookEventName\": \"UserPromptSubmit\", \"additionalContext\": …}}")
    p.add_argument("--socket", metavar="PATH",
                   help="ask the server (sqlite-rrf serve) listening here (default: the path "
                        "sqlite-rrf serve DB uses); without one the hook recalls itself")
    p.add_argument("--no-server", action="store_true", dest="no_server",
                   help="recall in this process even when a server is running")
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


def scope_words(scope: Any) -> str:
    """What a recall of the store's ``scope=`` covered, in words: ``every scope`` (None),
    ``the shared scope``, ``scope `shop```, ``scope `shop` and the shared scope``,
    ``scopes `a` and `b```."""
    if scope is None:
        return "every scope"
    names = [scope] if isinstance(scope, str) else list(scope)
    named = [code(s) for s in names if s]
    if not named:
        return "the shared scope"
    said = ("scope " if len(named) == 1 else "scopes ") + " and ".join(named)
    return said + (" and the shared scope" if "" in names else "")


def render(hits: List[Any], scope: Any, max_chars: int,
           now_ms: Optional[int] = None, max_total: int = 0) -> str:
    """The recollection as Markdown (H4): a header and one bullet per hit, at most
    ``max_total`` characters in all (H8; 0: no cap). ``scope`` is the recall's (None, a
    scope, or a list of scopes: :func:`scope_words`)."""
    if not hits:
        return ""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    lines = [f"Recalled from memory (sqlite-rrf, {scope_words(scope)}); may be outdated:"]
    total = len(lines[0]) + 1
    for i, h in enumerate(hits):  # H4a: nothing from the memory leaves its line or reads as a tag
        text = flatten(str(h.content))
        if max_chars and len(text) > max_chars:
            text = text[:max_chars].rstrip() + " …"
        mark = ", important" if h.importance == "high" else ""
        dups = getattr(h, "duplicates", 0)
        if dups:  # issue 20: the near-duplicates collapsed into this one
            mark += f", stands for {dups} near-duplicate{'s' if dups != 1 else ''}"
        line = (f"- {escape(text)} _(id {code(str(h.id))}, "
                f"{_age(h.created_at, now_ms)}{mark})_")
        left = len(hits) - i
        more = f"({left} more not shown: the hook's --max-total)"
        if max_total and total + len(line) + 1 + (len(more) + 1 if left > 1 else 0) > max_total:
            if i == 0:  # the first hit alone is too long: cut its text to fit
                room = max_total - total - (len(line) - len(escape(text))) - len(more) - 4
                if room >= 40:
                    cut = escape(text)[:room].rstrip() + " …"
                    lines.append(f"- {cut} _(id {code(str(h.id))}, "
                                 f"{_age(h.created_at, now_ms)}{mark})_")
                    left -= 1
            if left:
                lines.append(f"({left} more not shown: the hook's --max-total)")
            break
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def as_output(markdown: str, fmt: str = "markdown") -> str:
    """What the hook prints for ``markdown`` in ``fmt`` (H8): the Markdown itself, or
    Claude Code's ``hookSpecificOutput`` JSON; ``''`` when there is nothing to say."""
    if not markdown or fmt == "markdown":
        return markdown
    return json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                              "additionalContext": markdown}},
                      ensure_ascii=False) + "\n"


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


def main(argv: List[str]) -> int:
    """``sqlite-rrf hook ARGS`` (:func:`sqlite_rrf.cli.main` hands the command over): a
    parser of the hook's options only, so that asking a warm server imports nothing but
    the standard library and :mod:`sqlite_rrf.app` (H6, H7); ``--help`` is the full
    command line's."""
    if "-h" in argv or "--help" in argv:
        from .cli import build_parser

        build_parser().parse_args(["hook", *argv])  # prints the help and exits
    # a fixed width: argparse's default asks shutil (and its compression modules) for it
    p = argparse.ArgumentParser(prog="sqlite-rrf hook", formatter_class=lambda prog:
                                argparse.HelpFormatter(prog, width=100))
    add_arguments(p, light=True)
    from .app import int_arg

    p.add_argument("--model", metavar="MODEL")
    p.add_argument("--n-ctx", type=int_arg, default=None, dest="n_ctx")
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The hook: read the payload, recall (through a server when one runs, H7), print;
    then touch (H9). Exit status 0 always (H5)."""
    touch = None
    try:
        out, touch = _answer(args)
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
    if touch is not None:
        try:
            touch()
        except Exception:  # best effort (H9): the answer is out
            pass
    return 0


def check_request(req: Dict[str, Any]) -> None:
    """Refuse a hook request with a bad field (H5), naming the option (the hook checks
    its options with this, and the server each request it gets)."""
    limit, max_chars, max_total = req.get("limit"), req.get("max_chars"), req.get("max_total")
    for name, v in (("--limit", limit), ("--max-chars", max_chars),
                    ("--max-total", max_total)):
        if (isinstance(v, bool) or not isinstance(v, int)) and not (v is None and
                                                                    name == "--limit"):
            raise HookFault(f"{name}: expected an integer, got {v!r}")
    if limit is not None and not 1 <= limit <= 100:
        raise HookFault(f"--limit: must be from 1 to 100, got {limit}")
    if max_chars < 0:
        raise HookFault(f"--max-chars: must be 0 or more, got {max_chars}")
    if max_total < 0:
        raise HookFault(f"--max-total: must be 0 or more, got {max_total}")
    r = req.get("min_relevance")
    if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float))
                          or not 0 <= r <= 1):
        raise HookFault(f"--min-relevance: must be a number from 0 to 1, got {r}")
    if req.get("format") not in FORMATS:
        raise HookFault(f"--format: expected one of {', '.join(FORMATS)}, got "
                        f"{req.get('format')!r}")
    for name in ("prompt",):
        if not isinstance(req.get(name), str):
            raise HookFault(f"{name}: expected text")
    for name in ("session",):
        if req.get(name) is not None and not isinstance(req.get(name), str):
            raise HookFault(f"{name}: expected text or null")
    scope = req.get("scope")
    if scope is not None and not isinstance(scope, str) and not (
            isinstance(scope, list) and 1 <= len(scope) <= 2
            and all(isinstance(s, str) for s in scope)):
        raise HookFault("scope: expected text, a list of one or two texts, or null")


def respond(store: Any, req: Dict[str, Any]) -> Any:
    """The output for the hook request ``req`` (:func:`check_request`'s fields) from
    ``store``, and the recall's result to touch after it is printed (None when there is
    nothing to touch): ``(text, result)``. The hook in process and the server both use
    this, so their output is the same. A request without ``limit`` or ``min_relevance``
    gets the recall's and :data:`~sqlite_rrf.relevance.DEFAULT_MIN_RELEVANCE`."""
    if req.get("limit") is None:
        from .statements import recall_defaults

        req = dict(req, limit=recall_defaults()["result_limit"])
    if "min_relevance" not in req:
        from .relevance import DEFAULT_MIN_RELEVANCE

        req = dict(req, min_relevance=DEFAULT_MIN_RELEVANCE)
    prompt = req["prompt"]
    if not prompt.strip():
        return "", None
    result = store.recall(prompt, limit=req["limit"], scope=req.get("scope"),
                          session=req.get("session"), touch=False,
                          topic_gate=bool(req.get("topic_gate")),
                          min_relevance=req.get("min_relevance"))
    markdown = render(list(result), req.get("scope"), req["max_chars"],
                      max_total=req["max_total"])
    return as_output(markdown, req["format"]), result


def _request(args: argparse.Namespace) -> Dict[str, Any]:
    """The hook request of ``args`` and the payload on stdin."""
    req: Dict[str, Any] = {
        "v": 1, "op": "hook", "limit": getattr(args, "limit", None),
        "max_chars": args.max_chars, "max_total": getattr(args, "max_total", DEFAULT_MAX_TOTAL),
        "topic_gate": bool(getattr(args, "topic_gate", False)),
        "format": getattr(args, "format", "markdown"), "prompt": "", "scope": None,
        "session": None}
    if hasattr(args, "min_relevance"):  # else the default, where the recall is made
        req["min_relevance"] = args.min_relevance
    check_request(req)
    payload = read_payload()
    prompt = payload.get("prompt")
    if prompt is None:
        raise HookFault("stdin: the JSON has no \"prompt\" (expected "
                        "{\"session_id\": …, \"prompt\": …, \"cwd\": …})")
    if not isinstance(prompt, str):
        raise HookFault(f"stdin: \"prompt\" must be text, got {type(prompt).__name__}")
    session = payload.get("session_id")
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        session = None
    project = None
    if args.scope is None:
        cwd = payload.get("cwd")
        project = derive_scope(cwd if isinstance(cwd, str) and cwd else None)
    scopes = recall_scopes(args.scope, project, "--scope")
    req.update(prompt=prompt, session=session, scope=None if scopes is None else list(scopes))
    return req


def ask_server(path: str, req: Dict[str, Any],
               timeout: float = SERVER_TIMEOUT) -> Optional[Dict[str, Any]]:
    """The answer of the server listening at ``path`` to ``req``, or None when there is
    none to be had (no socket, not the user's own, refused, stale, closed mid-call, no
    answer in ``timeout`` seconds, not a JSON object): then the hook recalls itself (H7)."""
    import socket
    import stat

    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps(req, ensure_ascii=False).encode("utf-8") + b"\n")
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
        data = b"".join(chunks)
        if not data.endswith(b"\n"):  # closed mid-call
            return None
        answer = json.loads(data)
    except (OSError, ValueError):
        return None
    finally:
        s.close()
    return answer if isinstance(answer, dict) else None


def _answer(args: argparse.Namespace) -> Any:
    """What to print and what to do after (the touch), through a server or in process."""
    req = _request(args)
    if not req["prompt"].strip():
        return "", None
    req["db"] = os.path.realpath(args.db)
    if not getattr(args, "no_server", False):
        from .app import socket_path

        answer = ask_server(getattr(args, "socket", None) or socket_path(args.db), req)
        if answer is not None and not answer.get("wrong_db"):
            if answer.get("ok") is True and isinstance(answer.get("text"), str):
                return answer["text"], None
            if answer.get("ok") is False and isinstance(answer.get("error"), str):
                raise UserError(answer["error"])
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
    try:
        text, result = respond(store, req)
    except BaseException:
        store.close()
        raise

    def touch() -> None:  # H9: after the output
        try:
            if result is not None:
                store.touch(result)
        finally:
            store.close()

    return text, touch
