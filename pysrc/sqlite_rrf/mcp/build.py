"""The SDK's ``MCPServer`` with strict arguments (M13), and :func:`build_server`, which
binds the module-level tools and resources (:mod:`.tools`) to one endpoint: a store and
its default scope, given to the tools through the server's ``lifespan``.

Imported only by what runs a server: ``sqlite-rrf mcp`` (:func:`sqlite_rrf.mcp.run`, over
the wire of :mod:`.early`: :func:`serve_stdio`) and ``sqlite-rrf serve --http``
(:mod:`sqlite_rrf.serve`), one server per endpoint.
"""

import contextlib
from typing import Any, AsyncIterator, BinaryIO, Callable, Dict, List, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError

from .. import __version__
from . import RECENT_MAX_CHARS, RECENT_MEMORIES
from .errors import argument_errors, check_arguments
from .tools import TOOLS, Endpoint, recent_resource, stats_resource


class MemoryServer(MCPServer):
    """The SDK's server, with strict arguments (M13): its tools are :attr:`tools`."""

    tools: Dict[str, Tool]

    async def call_tool(self, name: str, arguments: Dict[str, Any], context: Any = None) -> Any:
        tool = self.tools.get(name)
        if tool is not None:
            check_arguments(tool, arguments or {})
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError) and tool is not None:
                raise ToolError(argument_errors(tool, e.__cause__)) from None
            if type(e) is not ToolError:  # the SDK's wrapper of a crash: as it is
                raise
            # the message alone, as the command line says it (M2)
            raise ToolError(str(e).removeprefix(f"Error executing tool {name}: ")) from e.__cause__


def endpoint_tools(ep: Endpoint) -> Dict[str, Tool]:
    """The tools of :data:`~.tools.TOOLS` as ``ep`` lists them: each description its
    docstring made one paragraph and its scope said for ``ep`` (M12), each input schema
    refusing other arguments (M13)."""
    tools: Dict[str, Tool] = {}
    for fn, annotations in TOOLS.values():
        t = Tool.from_function(
            fn, description=" ".join((fn.__doc__ or "").split()), annotations=annotations
        )
        for prop in t.parameters.get("properties", {}).values():
            if "description" in prop:
                prop["description"] = ep.describe(prop["description"])
        t.parameters["additionalProperties"] = False
        tools[t.name] = t
    return tools


def build_server(
    store: Any,
    default_scope: str,
    log_level: str = "WARNING",
    lock: Any = None,
    on_start: Optional[Callable[[], None]] = None,
) -> MemoryServer:
    """An ``MCPServer`` whose tools work on ``store``; ``default_scope`` as in M4;
    ``lock`` (default: a lock of its own) serialises the tools' calls with the store's
    other users (``sqlite-rrf serve``'s hook socket). Its ``lifespan`` yields the
    :class:`~.tools.Endpoint` the tools read from their context, after calling
    ``on_start`` once, when the server starts: over stdio, the transport owns file
    descriptor 1 by then (M3), so a model loaded from there writes nothing on the wire."""
    ep = Endpoint(store, default_scope, lock)
    started: List[bool] = []

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[Endpoint]:
        if on_start is not None and not started:
            started.append(True)
            on_start()
        yield ep

    tools = endpoint_tools(ep)
    server = MemoryServer(
        "sqlite-rrf",
        version=__version__,
        instructions=ep.instructions(),
        log_level=log_level,  # type: ignore[arg-type]
        tools=list(tools.values()),
        lifespan=lifespan,
    )
    server.tools = tools
    # M14: the server has no prompts: it does not answer prompts/list, so it does not
    # advertise the capability (the SDK's MCPServer registers the handlers for any server).
    for method in ("prompts/list", "prompts/get"):
        server._lowlevel_server._request_handlers.pop(method, None)
    # the SDK gives no context to a resource without URI parameters: bound to ``ep`` here
    server.add_resource(
        FunctionResource.from_function(
            lambda: stats_resource(ep),
            uri="memory://stats",
            name="stats",
            title="Memory statistics",
            mime_type="application/json",
            description="how many memories there are, by scope and importance, the oldest and "
            "newest (ISO 8601 UTC), the model",
        )
    )
    server.add_resource(
        FunctionResource.from_function(
            lambda: recent_resource(ep),
            uri="memory://recent",
            name="recent",
            title="Recent memories",
            mime_type="application/json",
            description=f"the {RECENT_MEMORIES} memories saved last in {ep.covers}, newest "
            f"first, each with its id, text (cut at {RECENT_MAX_CHARS} characters), "
            "when and scope",
        )
    )
    return server


def serve_stdio(server: MCPServer, server_in: BinaryIO, server_out: BinaryIO) -> None:
    """Run ``server`` as ``server.run("stdio")`` does, on the binary streams of a
    :class:`~.early.Wire` instead of the process's stdin and stdout (the wire owns
    those). Returns when ``server_in`` ends (the client closed its side)."""
    import io

    import anyio
    from mcp.server.stdio import stdio_server

    async def serve() -> None:
        stdin = anyio.wrap_file(io.TextIOWrapper(server_in, encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(io.TextIOWrapper(server_out, encoding="utf-8"))
        lowlevel = server._lowlevel_server
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())

    anyio.run(serve)
