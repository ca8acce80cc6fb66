"""``sqlite-rrf hook DB``: an agent's prompt hook.

An agent runs its prompt hook once per user prompt, passing JSON on stdin: at least
``{"session_id": …, "prompt": …, "cwd": …}`` (Claude Code's ``UserPromptSubmit`` shape;
other fields are ignored). The hook recalls for the prompt and prints the recollection as
short Markdown on stdout, which the agent adds to the model's context.

Its requirements, H1–H9, are in docs/contract.md ("The prompt hook"); tests/test_hook.py
cites them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time (H6)
if TYPE_CHECKING:
    from typing import Any, Dict, List, NoReturn, Optional

from .app import UserError, derive_scope, error_message, fault_message, open_store, recall_scopes
from .app.prompt_recall import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_TOTAL,
    FORMATS,
    HookFault,
    check_request,
    respond,
)

#: How long the hook waits for a server's answer (seconds) before it recalls itself (H7).
SERVER_TIMEOUT = 5.0

_PREFIX = "sqlite-rrf hook"


def add_arguments(p: argparse.ArgumentParser, light: bool = False) -> None:
    """The hook's arguments (the CLI's parser adds --model and --n-ctx). ``light``: the defaults of
    ``--limit`` and ``--min-relevance`` are left to whoever recalls
    (:func:`sqlite_rrf.app.prompt_recall.recall_options`), so
    the parser reads neither the statement nor the relevance model (:func:`main`)."""
    p.add_argument("db", help="the memory database (it must exist)")
    p.add_argument(
        "--scope",
        help="recall only this scope ('shared' or '' is the shared "
        "memory, '*' every scope); default: the project's scope and the shared "
        "one, the project's derived from the payload's cwd (the name of its git "
        "work tree's top directory, else of the directory)",
    )
    from .app import int_arg

    if light:
        p.add_argument("--limit", type=int_arg, default=argparse.SUPPRESS, metavar="N")
    else:
        from .core.statements import recall_defaults

        limit = recall_defaults()["result_limit"]
        p.add_argument(
            "--limit",
            type=int_arg,
            default=limit,
            metavar="N",
            help=f"how many episodes, 1 to 100 (default {limit}, the recall's)",
        )
    p.add_argument(
        "--max-chars",
        type=int_arg,
        default=DEFAULT_MAX_CHARS,
        dest="max_chars",
        metavar="N",
        help=f"cut each episode's text at this many characters (default "
        f"{DEFAULT_MAX_CHARS}; 0: never)",
    )
    if light:
        p.add_argument("--topic-gate", action="store_true", dest="topic_gate")
    else:
        from .core.gate import TOPIC_GATE_COSINE

        p.add_argument(
            "--topic-gate",
            action="store_true",
            dest="topic_gate",
            help=f"print nothing for a prompt whose embedding has cosine > "
            f"{TOPIC_GATE_COSINE} with the session's previous prompt (off by default: such "
            "a prompt can still ask something else)",
        )
    from .app import float_arg

    if light:
        p.add_argument(
            "--min-relevance",
            type=float_arg,
            default=argparse.SUPPRESS,
            dest="min_relevance",
            metavar="R",
        )
    else:
        from .core.relevance import DEFAULT_MIN_RELEVANCE

        p.add_argument(
            "--min-relevance",
            type=float_arg,
            default=DEFAULT_MIN_RELEVANCE,
            dest="min_relevance",
            metavar="R",
            help=f"print nothing unless an episode's relevance (0 to 1, the same "
            f"scale for every prompt) is at least R (default "
            f"{DEFAULT_MIN_RELEVANCE:g}; 0: always print)",
        )
    p.add_argument(
        "--max-total",
        type=int_arg,
        default=DEFAULT_MAX_TOTAL,
        dest="max_total",
        metavar="N",
        help=f"print at most N characters in all, every field counted (an id or scope "
        f"longer than its documented maximum is shown cut): the episodes that do not fit "
        f"are left out, and a last line says how many (default {DEFAULT_MAX_TOTAL}; 0: no "
        f"cap)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="markdown",
        help='markdown (default), or json: Claude Code\'s {"hookSpecificOutput": '
        '{"hookEventName": "UserPromptSubmit", "additionalContext": …}}',
    )
    p.add_argument(
        "--socket",
        metavar="PATH",
        help="ask the server (sqlite-rrf serve) listening here (default: the path "
        "sqlite-rrf serve DB uses); without one the hook recalls itself",
    )
    p.add_argument(
        "--no-server",
        action="store_true",
        dest="no_server",
        help="recall in this process even when a server is running",
    )
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
        raise HookFault(
            'stdin: expected the hook\'s JSON, e.g. echo \'{"prompt": "…"}\' | sqlite-rrf hook DB'
        )
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read()
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise HookFault(
                f"stdin: not valid UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start})"
            ) from None
    if not raw.strip():
        raise HookFault('stdin: empty; expected the hook\'s JSON ({"prompt": …})')
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as e:
        raise HookFault(
            f"stdin: invalid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise HookFault(f"stdin: invalid JSON ({why})") from None
    if not isinstance(payload, dict):
        raise HookFault(f"stdin: expected a JSON object, got {type(payload).__name__}")
    return payload


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
    the standard library and :mod:`sqlite_rrf.app` (H6, H7). ``--help`` is the full
    command line's: :func:`sqlite_rrf.cli.main` keeps it for itself."""
    # a fixed width: argparse's default asks shutil (and its compression modules) for it
    p = argparse.ArgumentParser(
        prog="sqlite-rrf hook", formatter_class=lambda prog: argparse.HelpFormatter(prog, width=100)
    )
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


def _request(args: argparse.Namespace) -> Dict[str, Any]:
    """The hook request of ``args`` and the payload on stdin."""
    req: Dict[str, Any] = {
        "v": 1,
        "op": "hook",
        "limit": getattr(args, "limit", None),
        "max_chars": args.max_chars,
        "max_total": getattr(args, "max_total", DEFAULT_MAX_TOTAL),
        "topic_gate": bool(getattr(args, "topic_gate", False)),
        "format": getattr(args, "format", "markdown"),
        "prompt": "",
        "scope": None,
        "session": None,
    }
    if hasattr(args, "min_relevance"):  # else the default, where the recall is made
        req["min_relevance"] = args.min_relevance
    check_request(req)
    payload = read_payload()
    prompt = payload.get("prompt")
    if prompt is None:
        raise HookFault(
            'stdin: the JSON has no "prompt" (expected {"session_id": …, "prompt": …, "cwd": …})'
        )
    if not isinstance(prompt, str):
        raise HookFault(f'stdin: "prompt" must be text, got {type(prompt).__name__}')
    session = payload.get("session_id")
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    if not isinstance(session, str) or not session:
        session = None
    _check_unicode(session, "session_id")
    project = None
    if args.scope is None:
        cwd = payload.get("cwd")
        _check_unicode(cwd, "cwd")
        project = derive_scope(cwd if isinstance(cwd, str) and cwd else None)
    scopes = recall_scopes(args.scope, project, "--scope")
    req.update(prompt=prompt, session=session, scope=None if scopes is None else list(scopes))
    return req


def _check_unicode(value: Any, field: str) -> None:
    """Refuse a payload text that no file name or database can hold: one with a lone
    surrogate (JSON's ``"\\ud800"``), naming the field and where it is."""
    if not isinstance(value, str):
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise HookFault(
            f'stdin: "{field}" holds a lone surrogate (\\u{ord(value[e.start]):04x} at '
            f"character {e.start}), which is not text a path or a memory can hold"
        ) from None


def ask_server(
    path: str, req: Dict[str, Any], timeout: float = SERVER_TIMEOUT
) -> Optional[Dict[str, Any]]:
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
        from .app.sockets import beside_or_private

        default = beside_or_private(socket_path(args.db), req["db"])
        answer = ask_server(getattr(args, "socket", None) or default, req)
        if answer is not None and not answer.get("wrong_db"):
            if answer.get("ok") is True and isinstance(answer.get("text"), str):
                return answer["text"], None
            if answer.get("ok") is False and isinstance(answer.get("error"), str):
                raise UserError(answer["error"])
    try:
        store = open_store(
            args.db,
            "recall",
            model=getattr(args, "model", None),
            n_ctx=getattr(args, "n_ctx", None),
        )
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
