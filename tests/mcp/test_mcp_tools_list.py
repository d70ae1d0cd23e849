"""``tools/list`` through the gateway: an upstream's titles, annotations, output schemas and ``_meta`` unchanged.

An upstream with everything a tool may declare, listed straight and through ``goldfive mcp`` by the real SDK
client: each tool is the same, but for ``execution`` (the gateway runs any call as a task when asked).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp_support import ROOT

RICH = """
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("rich")


class Quote(BaseModel):
    price: float
    currency: str


@server.tool(
    title="Price a trade",
    annotations=ToolAnnotations(title="Pricer", readOnlyHint=True, idempotentHint=True, openWorldHint=False),
    meta={"vendor/tier": "gold"},
)
def price(symbol: str, qty: int = 1) -> Quote:
    '''Quote a price.'''
    return Quote(price=1.5 * qty, currency="EUR")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def sell(symbol: str) -> str:
    return "sold"


server.run("stdio")
"""


def _listed(tools: list) -> dict[str, dict]:
    return {t.name: t.model_dump(by_alias=True, exclude_none=True, exclude={"execution"}) for t in tools}


async def test_tool_titles_annotations_output_schemas_and_meta_pass_through(tmp_path: Path) -> None:
    rich = tmp_path / "rich.py"
    rich.write_text(RICH)
    straight = StdioServerParameters(command=sys.executable, args=[str(rich)])
    async with Client(straight, mode="legacy") as client:
        upstream = _listed((await client.list_tools()).tools)
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db")]
    argv += ["--upstream", f"r={sys.executable} {rich}"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        through = _listed((await client.list_tools()).tools)
        caps = client.session.server_capabilities
    assert through == upstream
    assert through["price"]["outputSchema"]["properties"]["price"]["type"] == "number"
    assert through["price"]["annotations"]["readOnlyHint"] is True and through["price"]["title"] == "Price a trade"
    assert through["price"]["_meta"] == {"vendor/tier": "gold"}
    assert caps is not None and caps.tools is not None and caps.tools.list_changed is True
