"""MCP over streamable HTTP: each request goes to the endpoint its URL names (S8, S9),
behind the bearer tokens (S6); an endpoint is an MCP server bound to a store and a scope,
built when it is first asked for and dropped beyond :data:`~.settings.MAX_ENDPOINTS`."""

from __future__ import annotations

import json
import unicodedata
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from .settings import MAX_ENDPOINTS, MCP_PATH, SCOPE_SEGMENT, TENANT_NAME, TENANT_SEGMENT

if TYPE_CHECKING:
    from .tenants import TenantPool


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
    ) -> None:
        self.build = build
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
        where = route(raw)
        if where is None:
            raise HttpError(404, self._paths_hint())
        tenant, scope_name = where
        if not self._authorised(scope, tenant):
            body = b'{"error": "unauthorized: send Authorization: Bearer TOKEN"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="sqlite-rrf"'),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
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
    body = json.dumps({"error": message}).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
