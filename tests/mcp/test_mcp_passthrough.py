"""Resources, prompts and completions pass through ``goldfive mcp`` whole: every page, their notices, subscriptions.

The upstream is the MCP SDK's low-level server (tests/mcp/catalog_upstream.py): lists of two items a page,
``listChanged`` for resources and prompts, subscriptions (recorded) and completions — or, with ``--plain``, none
of those. The client is the real MCP SDK client on the gateway's stdio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp_support import ROOT, text

CATALOG = Path(__file__).with_name("catalog_upstream.py")


class Seen:
    """The notifications the client got, by kind."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.changed = asyncio.Event()

    async def handle(self, message: object) -> None:
        if not isinstance(message, Exception):
            self.items.append(message)
            self.changed.set()

    async def wait_for(self, kind: type[Any], count: int = 1) -> list[Any]:
        async def enough() -> list[Any]:
            while len(found := [m for m in self.items if isinstance(m, kind)]) < count:
                self.changed.clear()
                await self.changed.wait()
            return found

        return await asyncio.wait_for(enough(), 30)


@contextlib.asynccontextmanager
async def catalog(tmp: Path, *upstream_flags: str, seen: Seen | None = None) -> AsyncIterator[Client]:
    calls = tmp / "calls.jsonl"
    spec = f"c={sys.executable} {CATALOG} --calls {calls} {' '.join(upstream_flags)}".strip()
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp / "g.db"), "--default", "allow", "--upstream", spec]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy", cache=None, message_handler=seen.handle if seen else None) as client:
        yield client


def _records(tmp: Path) -> list[dict[str, Any]]:
    calls = tmp / "calls.jsonl"
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


async def test_every_page_of_resources_templates_and_prompts_is_listed(tmp_path: Path) -> None:
    async with catalog(tmp_path) as client:
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        read = await client.read_resource("doc://4")  # on the last page
        prompt = await client.get_prompt("p4", {"topic": "gardens"})
    assert resources == [f"doc://{i}" for i in range(5)]
    assert templates == ["doc://{name}", "note://{day}", "log://{level}"]
    assert prompts == [f"p{i}" for i in range(5)]
    assert read.contents[0].text == "the text of doc://4"
    assert prompt.messages[0].content.text == "p4 on gardens"


async def test_the_gateway_declares_what_its_upstreams_offer_and_nothing_more(tmp_path: Path) -> None:
    async with catalog(tmp_path) as client:
        full = client.server_capabilities
    async with catalog(tmp_path, "--plain") as client:
        plain = client.server_capabilities
    assert full.resources is not None and full.resources.subscribe and full.resources.list_changed
    assert full.prompts is not None and full.prompts.list_changed
    assert full.completions is not None
    assert plain.resources is not None and not plain.resources.subscribe and not plain.resources.list_changed
    assert plain.prompts is not None and not plain.prompts.list_changed
    assert plain.completions is None


async def test_an_upstreams_resource_and_prompt_list_changes_reach_the_client(tmp_path: Path) -> None:
    seen = Seen()
    async with catalog(tmp_path, seen=seen) as client:
        assert text(await client.call_tool("grow", {})) == "grown"
        await seen.wait_for(types.ResourceListChangedNotification)
        await seen.wait_for(types.PromptListChangedNotification)
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        prompts = [p.name for p in (await client.list_prompts()).prompts]
    assert resources[-1] == "doc://5" and prompts[-1] == "p5"


async def test_a_subscription_is_made_upstream_and_only_its_updates_reach_the_client(tmp_path: Path) -> None:
    seen = Seen()
    async with catalog(tmp_path, seen=seen) as client:
        await client.list_resources()
        await client.session.subscribe_resource("doc://1")
        await client.call_tool("touch", {"uri": "doc://2"})  # not subscribed: not passed on
        await client.call_tool("touch", {"uri": "doc://1"})
        await seen.wait_for(types.ResourceUpdatedNotification)
        await client.session.unsubscribe_resource("doc://1")
        await client.call_tool("touch", {"uri": "doc://1"})  # unsubscribed: not passed on
        await client.session.subscribe_resource("doc://4")
        await client.call_tool("touch", {"uri": "doc://4"})  # the last one: what came before it has come
        updated = await seen.wait_for(types.ResourceUpdatedNotification, count=2)
    assert [str(m.params.uri) for m in updated] == ["doc://1", "doc://4"]
    assert [r for r in _records(tmp_path) if "subscribe" in r or "unsubscribe" in r] == [
        {"subscribe": "doc://1"},
        {"unsubscribe": "doc://1"},
        {"subscribe": "doc://4"},
    ]


async def test_completions_are_asked_of_the_upstream_that_listed_the_prompt_or_template(tmp_path: Path) -> None:
    async with catalog(tmp_path) as client:
        await client.list_prompts()
        await client.list_resource_templates()
        topics = await client.complete(types.PromptReference(name="p3"), {"name": "topic", "value": "ga"})
        names = await client.complete(
            types.ResourceTemplateReference(uri="doc://{name}"), {"name": "name", "value": "3"}
        )
    assert topics.completion.values == ["gardens", "gates", "garages"]
    assert names.completion.values == ["3"]
    assert [r for r in _records(tmp_path) if "complete" in r] == [
        {"complete": "p3", "argument": "topic"},
        {"complete": "doc://{name}", "argument": "name"},
    ]
