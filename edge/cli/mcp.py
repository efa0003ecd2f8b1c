"""`fixloop mcp`: the plant's three tools for other agents, as an MCP server over stdio.

The service serves the same tools over streamable HTTP at `/mcp`, behind the technician tokens.
"""

from __future__ import annotations

import argparse
import threading
from typing import TYPE_CHECKING

from edge.config import Config

if TYPE_CHECKING:
    from tools.registry import ToolRegistry


def register(subparsers: argparse._SubParsersAction) -> None:
    mcp = subparsers.add_parser("mcp", help="serve the three tools to other agents over MCP (stdio)")
    mcp.set_defaults(func=run_mcp)


def run_mcp(args: argparse.Namespace, config: Config) -> int:
    # The SDK and the tools load here, not at import: `fixloop --help` stays fast.
    import anyio

    from edge.agent import build_registry
    from edge.manual_index import ensure_index
    from edge.mcp_server import serve_stdio

    ensure_index(config)
    registry = build_registry(config)
    # As the service does: a symptom search gets the SBERT model once it has loaded, keywords until then.
    threading.Thread(target=warm, args=(registry,), name="warm", daemon=True).start()
    try:
        anyio.run(serve_stdio, registry, config)
    except KeyboardInterrupt:
        pass
    finally:
        registry.close()
    return 0


def warm(registry: ToolRegistry) -> None:
    for tool in registry:
        tool.warm()
