"""Per-tenant files (S9): a directory of memories, one file per tenant, their stores
opened lazily with the one shared model and closed when unused; each tenant's bearer
token (``--tenant-tokens``)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Dict, Optional

from ..app import UserError, note
from .settings import IDLE_CLOSE_SECONDS, MAX_OPEN_STORES, TENANT_NAME, TENANT_SUFFIX, check_token

if TYPE_CHECKING:
    from ..store import EmbedderLike, Store


def read_tenant_tokens(path: str) -> Dict[str, str]:
    """``--tenant-tokens FILE``: ``TENANT TOKEN`` a line → a token for each tenant (S9). A
    line whose first character other than white space is ``#`` is a comment (a ``#``
    anywhere else is part of the token); every token has at least
    :data:`~sqlite_rrf.serve.settings.MIN_TOKEN_CHARS` characters (a shorter one is
    refused, naming its line)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(
            f"--tenant-tokens: {path}: {getattr(e, 'strerror', None) or 'not UTF-8 text'}"
        ) from None
    tokens: Dict[str, str] = {}
    for n, line in enumerate(lines, 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) != 2 or not TENANT_NAME.fullmatch(words[0]):
            raise UserError(
                f"--tenant-tokens: {path} line {n}: expected 'TENANT TOKEN' "
                "(a tenant's name is letters, digits, '.', '_', '-'; a comment is a "
                "line of its own that starts with '#')"
            )
        if words[0] in tokens:
            raise UserError(
                f"--tenant-tokens: {path} line {n}: tenant {words[0]!r} has a token already"
            )
        tokens[words[0]] = check_token(
            words[1], f"--tenant-tokens: {path} line {n} (tenant {words[0]!r})"
        )
    if not tokens:
        raise UserError(f"--tenant-tokens: {path} names no tenant")
    return tokens


class Tenant:
    """One tenant: its file, its lock (its tools' calls, one at a time) and its store
    while open."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.lock = threading.Lock()
        self.store: Optional[Store] = None
        self.used = 0.0


class TenantStore:
    """What an endpoint's tools see as their store: the tenant's store, opened when a
    tool first uses it (under the tenant's lock, which the tools hold)."""

    def __init__(self, pool: "TenantPool", tenant: Tenant) -> None:
        self._pool = pool
        self._tenant = tenant
        self.path = tenant.path
        #: The tenant's name: what its endpoints show instead of the server's path.
        self.tenant_name = tenant.name

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool.store(self._tenant), name)


class TenantPool:
    """A directory of memories, one file per tenant (S9): stores opened lazily with the
    one shared ``embedder``, at most ``max_open`` open (least recently used closed
    first), those unused for ``idle_close`` seconds closed by :meth:`close_idle`."""

    def __init__(
        self,
        directory: str,
        embedder: Optional[EmbedderLike] = None,
        *,
        max_open: int = MAX_OPEN_STORES,
        idle_close: float = IDLE_CLOSE_SECONDS,
        create: bool = False,
    ) -> None:
        self.directory = directory
        self.embedder = embedder
        self.max_open = max_open
        self.idle_close = idle_close
        self.create = create
        self._lock = threading.Lock()
        self._tenants: Dict[str, Tenant] = {}
        self._open: "OrderedDict[str, Tenant]" = OrderedDict()  # least recent first

    def path_of(self, name: str) -> str:
        """The file of tenant ``name`` (a ValueError for a name :data:`TENANT_NAME`
        refuses)."""
        if not TENANT_NAME.fullmatch(name):
            raise ValueError(f"tenant {name!r}: not a tenant's name")
        return os.path.join(self.directory, name + TENANT_SUFFIX)

    def exists(self, name: str) -> bool:
        """Whether tenant ``name`` has a file."""
        return os.path.isfile(self.path_of(name))

    def tenant(self, name: str) -> Tenant:
        """The tenant ``name`` (its store not opened)."""
        with self._lock:
            t = self._tenants.get(name)
            if t is None:
                t = self._tenants[name] = Tenant(name, self.path_of(name))
            return t

    def open_count(self) -> int:
        """How many tenants' stores are open."""
        with self._lock:
            return len(self._open)

    def store(self, tenant: Tenant) -> Store:
        """The tenant's store, opened if it is not; the caller holds ``tenant.lock``."""
        with self._lock:
            tenant.used = time.monotonic()
            if tenant.store is not None:
                self._open.move_to_end(tenant.name)
                return tenant.store
        if not self.create and not os.path.isfile(tenant.path):
            raise UserError(f"tenant {tenant.name!r}: its file no longer exists")
        store = open_tenant_store(tenant.path, self.embedder)
        with self._lock:
            tenant.store = store
            tenant.used = time.monotonic()
            self._open[tenant.name] = tenant
            self._close_beyond(self.max_open, keep=tenant)
        return store

    def _close_beyond(
        self, bound: int, keep: Optional[Tenant] = None, idle_before: Optional[float] = None
    ) -> int:
        """Close the least recently used stores until at most ``bound`` are open (or, with
        ``idle_before``, those unused since then); a store in a call is skipped. Holds
        ``self._lock``."""
        closed = 0
        for name in list(self._open):
            t = self._open[name]
            if idle_before is None and len(self._open) <= bound:
                break
            if idle_before is not None and t.used >= idle_before:
                continue
            if t is keep or not t.lock.acquire(blocking=False):
                continue
            try:
                if t.store is not None:
                    with contextlib.suppress(Exception):
                        t.store.close()  # the shared model stays loaded
                t.store = None
                del self._open[name]
                closed += 1
            finally:
                t.lock.release()
        return closed

    def trim(self) -> int:
        """Close the least recently used stores beyond ``max_open`` (one in a call stays
        open); how many were closed."""
        with self._lock:
            return self._close_beyond(self.max_open)

    def close_idle(self) -> int:
        """Close the stores unused for ``idle_close`` seconds; how many were closed."""
        with self._lock:
            return self._close_beyond(0, idle_before=time.monotonic() - self.idle_close)

    def close_all(self) -> None:
        """Close every open store (waiting for a call in progress)."""
        for t in list(self._tenants.values()):
            with t.lock:
                if t.store is not None:
                    with contextlib.suppress(Exception):
                        t.store.close()
                    t.store = None
        with self._lock:
            self._open.clear()


def open_tenant_store(path: str, embedder: Optional[EmbedderLike]) -> Store:
    """A tenant's Store with the shared model (without the vector list when the file was
    made with another model, said on stderr)."""
    from ..mcp import WRITE_PATIENCE_MS
    from ..store import Store, StoreError

    store = Store(path)
    try:
        if embedder is not None:
            try:
                store.attach_embedder(embedder, remember=not store.readonly)
            except StoreError as e:
                note(f"{path}: the vector list is off: {e}")
        store.busy_timeout_ms = WRITE_PATIENCE_MS
    except BaseException:
        store.close()
        raise
    return store
