"""MCP over streamable HTTP: each request goes to the endpoint its URL names (S8, S9),
behind the bearer tokens (S6); an endpoint is an MCP server bound to a store and a scope,
built when it is first asked for and dropped beyond :data:`~.settings.MAX_ENDPOINTS`.

S10. The prompt hook over HTTP (Claude Code's ``"type": "http"`` hook): ``POST``
    :data:`~sqlite_rrf.app.hosts.HOOK_PATH` with the hook's JSON (``prompt``,
    ``session_id``, ``cwd``, as on a command hook's stdin) is answered 200 with what
    ``sqlite-rrf hook DB --format json`` prints for it: Claude Code's
    ``hookSpecificOutput`` JSON, or an empty body when there is nothing to say. The scope
    is derived from the payload's ``cwd`` as the command hook derives it; the URL's query
    may set ``scope``, ``limit``, ``max_chars``, ``max_total``, ``min_relevance`` and
    ``topic_gate`` as the hook's options do. A bad payload is answered 400 with one line
    (``{"error": …}``; a non-2xx answer is a non-blocking error for Claude Code), a body
    over :data:`~.settings.MAX_REQUEST_BYTES` 413. ``GET`` on the same path answers the
    server's ping (``{"ok": true, "db": …, "pid": …, "version": …, "model": …}``; the
    model's file name, or null without one). The hits are touched
    after the answer is sent (S4). Behind the same bearer token as MCP (S6); a server of
    tenants (``--dir``) has no hook (404).
S11. A client that goes away mid-request costs one line on stderr at WARNING, not a
    traceback.
"""

from __future__ import annotations

import json
import logging
import unicodedata
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Sequence, Tuple

from ..app.hosts import HOOK_PATH
from ..serve.settings import (
    MAX_ENDPOINTS,
    MAX_REQUEST_BYTES,
    MCP_PATH,
    SCOPE_SEGMENT,
    TENANT_NAME,
    TENANT_SEGMENT,
)

if TYPE_CHECKING:
    from ..serve.tenants import TenantPool


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def segment(raw: bytes, what: str) -> str:
    """One percent-encoded path segment as text."""
    from urllib.parse import unquote_to_bytes

    try:
        text = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise HttpError(400, f"the {what} in the URL is not UTF-8") from None
    if not text or any(unicodedata.category(ch) == "Cc" for ch in text):
        raise HttpError(400, f"the {what} in the URL is empty or holds control characters")
    return text


def route(raw_path: bytes) -> Optional[Tuple[Optional[str], Optional[str]]]:
    """``(tenant, scope)`` of an endpoint's path (S8, S9): ``/mcp`` → (None, None),
    ``/s/SCOPE/mcp`` → (None, SCOPE), ``/t/TENANT/mcp`` → (TENANT, None),
    ``/t/TENANT/s/SCOPE/mcp`` → (TENANT, SCOPE); None for a path that is none of these.
    A tenant's name that :data:`TENANT_NAME` refuses is an error (400)."""
    parts = raw_path.split(b"?", 1)[0].split(b"/")
    if parts[-1] == b"" and len(parts) > 2:
        parts.pop()  # one trailing slash
    if parts[:1] != [b""] or parts[-1] != MCP_PATH[1:].encode():
        return None
    middle = parts[1:-1]
    tenant = scope = None
    if middle[:1] == [TENANT_SEGMENT.encode()] and len(middle) >= 2:
        tenant = segment(middle[1], "tenant")
        if not TENANT_NAME.fullmatch(tenant):
            raise HttpError(
                400,
                f"tenant {tenant!r}: a tenant's name is 1 to 64 letters, "
                "digits, '.', '_' or '-', starting with a letter or digit",
            )
        middle = middle[2:]
    if middle[:1] == [SCOPE_SEGMENT.encode()] and len(middle) == 2:
        scope = segment(middle[1], "scope")
        middle = []
    return (tenant, scope) if not middle else None


class Endpoint:
    """One MCP server (its tools bound to a store and a default scope) and its stateless
    session manager, running in the router's task group."""

    def __init__(self, key: Tuple[Optional[str], str]) -> None:
        import anyio

        self.key = key
        self.manager: Any = None
        self.ready = anyio.Event()
        self.stop = anyio.Event()
        self.inflight = 0


class HttpRouter:
    """The ASGI app of ``--http``: each request goes to the endpoint its path names (S8,
    S9), behind the bearer tokens (S6). ``build(tenant, scope)`` makes an endpoint's
    ``MCPServer``; ``tenants`` (``--dir``) says which tenants exist."""

    def __init__(
        self,
        build: Callable[[Optional[str], str], Any],
        host: str,
        default_scope: str,
        token: Optional[str] = None,
        tenant_tokens: Optional[Dict[str, str]] = None,
        tenants: Optional["TenantPool"] = None,
        max_endpoints: int = MAX_ENDPOINTS,
        hook: Any = None,
    ) -> None:
        quiet_gone_clients()
        self.build = build
        self.hook = hook  # the warm Server (serve_request, real_db), or None: no hook (S10)
        self.host = host
        self.default_scope = default_scope
        self.tenants = tenants
        self.max_endpoints = max_endpoints
        self._token = None if token is None else f"Bearer {token}".encode("utf-8")
        self._tenant_tokens = {
            t: f"Bearer {v}".encode("utf-8") for t, v in (tenant_tokens or {}).items()
        }
        self._endpoints: "OrderedDict[Tuple[Optional[str], str], Endpoint]" = OrderedDict()
        self._tg: Any = None

    # -- the server's life --

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                await self._serve(scope, receive, send)
            except HttpError as e:
                await answer(send, e.status, str(e))
            except Exception as e:  # S11: a client gone mid-request is one line
                if not isinstance(e, ClientGone) and type(e).__name__ != "ClientDisconnect":
                    raise
                say_disconnected(scope)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        import anyio

        await receive()  # lifespan.startup
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self.tenants is not None:
                tg.start_soon(self._close_idle_stores)
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            tg.cancel_scope.cancel()
        self._endpoints.clear()
        await send({"type": "lifespan.shutdown.complete"})

    async def _close_idle_stores(self) -> None:
        import anyio

        assert self.tenants is not None
        every = max(0.5, min(self.tenants.idle_close / 4, 30.0))
        while True:
            await anyio.sleep(every)
            await anyio.to_thread.run_sync(self.tenants.close_idle)

    # -- a request --

    def _authorised(self, scope: Dict[str, Any], tenant: Optional[str]) -> bool:
        import hmac

        if self._token is None and not self._tenant_tokens:
            return True
        got = dict(scope.get("headers") or []).get(b"authorization", b"")
        ok = False
        for expected in (self._token, self._tenant_tokens.get(tenant or "")):
            if expected is not None and hmac.compare_digest(got, expected):
                ok = True
        return ok

    async def _serve(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") or scope["path"].encode("utf-8")
        if raw.split(b"?", 1)[0].rstrip(b"/") == HOOK_PATH.encode():
            await self._hook(scope, receive, send)
            return
        where = route(raw)
        if where is None:
            raise HttpError(404, self._paths_hint())
        tenant, scope_name = where
        if not self._authorised(scope, tenant):
            await unauthorised(send)
            return
        if (tenant is None) != (self.tenants is None):
            raise HttpError(404, self._paths_hint())
        if tenant is not None:
            assert self.tenants is not None
            if not self.tenants.exists(tenant) and not self.tenants.create:
                raise HttpError(
                    404,
                    f"no tenant {tenant!r} (its file does not exist; "
                    "the server was not started with --create-tenants)",
                )
        endpoint = await self._endpoint(
            (tenant, self.default_scope if scope_name is None else scope_name)
        )
        endpoint.inflight += 1
        try:
            await endpoint.manager.handle_request(scope, receive, send)
        finally:
            endpoint.inflight -= 1
        if self.tenants is not None and self.tenants.open_count() > self.tenants.max_open:
            import anyio  # the stores in calls when others opened: closed now

            await anyio.to_thread.run_sync(self.tenants.trim)

    async def _hook(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        """S10: the prompt hook over HTTP."""
        import anyio

        if not self._authorised(scope, None):
            await unauthorised(send)
            return
        if self.hook is None:
            raise HttpError(
                404, "this server answers no prompt hook (a server of tenants has none)"
            )
        method = scope.get("method", "GET")
        if method == "GET":
            ping, _ = self.hook.serve_request({"v": 1, "op": "ping"})
            emb = getattr(self.hook.store, "embedder", None)
            ping["model"] = getattr(emb, "model_name", None)  # what setup --check reports
            await answer_json(send, 200, json.dumps(ping).encode("utf-8"))
            return
        if method != "POST":
            raise HttpError(405, f"{HOOK_PATH} answers POST (the hook) and GET (a ping)")
        body = await read_body(receive)
        from ..app import UserError

        try:
            req = hook_request(body, scope.get("query_string") or b"", self.hook.real_db)
            result, after = await anyio.to_thread.run_sync(self.hook.serve_request, req)
        except UserError as e:
            raise HttpError(400, str(e)) from None
        if not result.get("ok"):
            raise HttpError(400, str(result.get("error")))
        await answer_json(send, 200, result["text"].encode("utf-8"))
        if after is not None:  # S4: the touch after the answer
            await anyio.to_thread.run_sync(after)

    def _paths_hint(self) -> str:
        if self.tenants is not None:
            return (
                f"not an endpoint: this server serves tenants at /{TENANT_SEGMENT}/"
                f"TENANT{MCP_PATH} and /{TENANT_SEGMENT}/TENANT/{SCOPE_SEGMENT}/SCOPE"
                f"{MCP_PATH}"
            )
        return (
            f"not an endpoint: this server serves {MCP_PATH} and /{SCOPE_SEGMENT}/SCOPE{MCP_PATH}"
        )

    async def _endpoint(self, key: Tuple[Optional[str], str]) -> Endpoint:
        import anyio

        endpoint = self._endpoints.get(key)
        while endpoint is not None:
            await endpoint.ready.wait()
            if endpoint.manager is None:
                raise HttpError(500, "the endpoint could not be started (see the server's stderr)")
            if self._endpoints.get(key) is endpoint:
                self._endpoints.move_to_end(key)
                return endpoint
            endpoint = self._endpoints.get(key)  # dropped while this request waited
        endpoint = self._endpoints[key] = Endpoint(key)
        try:
            mcp = await anyio.to_thread.run_sync(self.build, key[0], key[1])
            mcp.streamable_http_app(
                streamable_http_path=MCP_PATH, host=self.host, stateless_http=True
            )
            await self._tg.start(self._run_endpoint, endpoint, mcp.session_manager)
        except BaseException:
            self._endpoints.pop(key, None)
            raise
        finally:
            endpoint.ready.set()
        self._drop_endpoints()
        return endpoint

    @staticmethod
    async def _run_endpoint(endpoint: Endpoint, manager: Any, *, task_status: Any) -> None:
        async with manager.run():
            endpoint.manager = manager
            task_status.started()
            await endpoint.stop.wait()

    def _drop_endpoints(self) -> None:
        """Drop the least recently used endpoints beyond the bound (none in a request)."""
        excess = len(self._endpoints) - self.max_endpoints
        for key in list(self._endpoints):
            if excess <= 0:
                break
            endpoint = self._endpoints[key]
            if endpoint.inflight == 0 and endpoint.manager is not None:
                del self._endpoints[key]
                endpoint.stop.set()
                excess -= 1


async def answer(send: Any, status: int, message: str) -> None:
    await answer_json(send, status, json.dumps({"error": message}).encode("utf-8"))


async def unauthorised(send: Any) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer TOKEN"}'
    await answer_json(send, 401, body, [(b"www-authenticate", b'Bearer realm="sqlite-rrf"')])


async def answer_json(
    send: Any, status: int, body: bytes, headers: Sequence[Tuple[bytes, bytes]] = ()
) -> None:
    """``body`` (JSON, or empty: nothing to say) with ``status`` and any other ``headers``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                *headers,
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def read_body(receive: Any) -> bytes:
    """The request's body, at most :data:`~.settings.MAX_REQUEST_BYTES` (413 beyond)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise HttpError(413, f"the hook's JSON is longer than {MAX_REQUEST_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


class ClientGone(Exception):
    """The client went away before its request was read (S11)."""


_log = logging.getLogger("sqlite_rrf.serve")


class GoneClients(logging.Filter):
    """S11: the MCP SDK logs a client that went away mid-request (Starlette's
    ``ClientDisconnect``) as an error with its traceback; this makes it one line at WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and type(exc).__name__ == "ClientDisconnect":
            said = record.getMessage()
            record.msg, record.args = "a client went away mid-request (%s)", (said,)
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


def quiet_gone_clients() -> None:
    """Put :class:`GoneClients` on the SDK's streamable HTTP logger (once)."""
    logger = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(f, GoneClients) for f in logger.filters):
        logger.addFilter(GoneClients())


def say_disconnected(scope: Dict[str, Any]) -> None:
    """S11: one line for a client that went away mid-request."""
    client = scope.get("client") or ("?", 0)
    path = scope.get("path", "")
    _log.warning(
        "client %s:%s went away during %s %s", client[0], client[1], scope.get("method"), path
    )


#: The hook's options a URL's query may set (S10), and how each is read.
_QUERY: Dict[str, Any] = {
    "scope": str,
    "limit": int,
    "max_chars": int,
    "max_total": int,
    "min_relevance": float,
    "topic_gate": lambda v: v.lower() in ("1", "true", "yes"),
}


def hook_request(body: bytes, query: bytes, real_db: str) -> Dict[str, Any]:
    """The hook socket's request (S3) for an HTTP hook's ``body`` and URL ``query``: the
    same as ``sqlite-rrf hook DB --format json`` sends for that JSON on its stdin."""
    from urllib.parse import parse_qsl

    from ..app import UserError, derive_scope, recall_scopes
    from ..app.prompt_recall import DEFAULT_MAX_CHARS, DEFAULT_MAX_TOTAL, HookFault, check_request

    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise HookFault('the body: expected the hook\'s JSON ({"prompt": …})') from None
    if not isinstance(payload, dict):
        raise HookFault(f"the body: expected a JSON object, got {type(payload).__name__}")
    prompt = payload.get("prompt")
    if not isinstance(prompt, str):
        raise HookFault(
            'the body: "prompt" must be text (expected {"session_id": …, "prompt": …, "cwd": …})'
        )
    session = payload.get("session_id")
    if isinstance(session, (int, float)) and not isinstance(session, bool):
        session = str(session)
    opts: Dict[str, Any] = {}
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if key not in _QUERY:
            raise UserError(
                f"{key}: not an option of the hook's URL (it takes {', '.join(_QUERY)})"
            )
        try:
            opts[key] = _QUERY[key](value)
        except ValueError:
            raise UserError(f"{key}: expected a number, got {value!r}") from None
    cwd = payload.get("cwd")
    project = None
    if opts.get("scope") is None:
        project = derive_scope(cwd if isinstance(cwd, str) and cwd else None)
    scopes = recall_scopes(opts.get("scope"), project, "scope")
    req: Dict[str, Any] = {
        "v": 1,
        "op": "hook",
        "db": real_db,
        "prompt": prompt,
        "session": session if isinstance(session, str) and session else None,
        "scope": None if scopes is None else list(scopes),
        "limit": opts.get("limit"),
        "max_chars": opts.get("max_chars", DEFAULT_MAX_CHARS),
        "max_total": opts.get("max_total", DEFAULT_MAX_TOTAL),
        "topic_gate": bool(opts.get("topic_gate", False)),
        "format": "json",
    }
    if "min_relevance" in opts:
        req["min_relevance"] = opts["min_relevance"]
    check_request(req)
    return req
