"""An upstream MCP server with lists longer than one page, subscriptions, completions and list-change notices.

For the gateway's pass-through tests (the MCP SDK's low-level server, so each page and notification is the test's):

* resources ``doc://0`` … ``doc://4`` (two a page), templates ``doc://{name}``, ``note://{day}`` and
  ``log://{level}`` (two a page), prompts ``p0`` … ``p4`` (two a page, each with a ``topic`` argument);
* ``resources/subscribe`` and ``resources/unsubscribe``, recorded (one JSON line each in ``--calls``);
* ``completion/complete``: a prompt's ``topic`` completes from TOPICS, the template ``doc://{name}``'s ``name``
  from the documents' names — each value starting with what was typed;
* tools ``grow()`` (adds ``doc://5`` and ``p5``, then sends ``notifications/resources/list_changed`` and
  ``notifications/prompts/list_changed``) and ``touch(uri)`` (sends ``notifications/resources/updated`` for it).

``--plain``: declares no subscriptions, no list changes and no completions (and serves none of them).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

PAGE = 2
TOPICS = ["gardens", "gates", "kitchens", "garages"]
TEMPLATES = [("doc://{name}", "doc"), ("note://{day}", "note"), ("log://{level}", "log")]


def _page(items: list[Any], params: types.PaginatedRequestParams | None) -> tuple[list[Any], str | None]:
    start = int(params.cursor) if params is not None and params.cursor else 0
    end = start + PAGE
    return items[start:end], (str(end) if end < len(items) else None)


def build(calls: str, plain: bool) -> Server[Any]:
    docs = [f"doc://{i}" for i in range(5)]
    prompts = [f"p{i}" for i in range(5)]

    def record(entry: dict[str, Any]) -> None:
        if calls:
            with Path(calls).open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        page, cursor = _page(docs, params)
        return types.ListResourcesResult(
            resources=[types.Resource(uri=uri, name=uri.split("//")[1]) for uri in page], next_cursor=cursor
        )

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        page, cursor = _page(TEMPLATES, params)
        found = [types.ResourceTemplate(uri_template=t, name=n) for t, n in page]
        return types.ListResourceTemplatesResult(resource_templates=found, next_cursor=cursor)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=f"the text of {uri}")])

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        page, cursor = _page(prompts, params)
        argument = types.PromptArgument(name="topic", required=True)
        return types.ListPromptsResult(
            prompts=[types.Prompt(name=name, arguments=[argument]) for name in page], next_cursor=cursor
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        topic = (params.arguments or {}).get("topic", "")
        message = types.PromptMessage(role="user", content=types.TextContent(text=f"{params.name} on {topic}"))
        return types.GetPromptResult(messages=[message])

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        record({"subscribe": str(params.uri)})
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        record({"unsubscribe": str(params.uri)})
        return types.EmptyResult()

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        typed = params.argument.value
        if isinstance(params.ref, types.PromptReference):
            record({"complete": params.ref.name, "argument": params.argument.name})
            pool = TOPICS
        else:
            record({"complete": str(params.ref.uri), "argument": params.argument.name})
            pool = [uri.split("//")[1] for uri in docs] if str(params.ref.uri) == "doc://{name}" else []
        return types.CompleteResult(completion=types.Completion(values=[v for v in pool if v.startswith(typed)]))

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        schema: dict[str, Any] = {"type": "object", "properties": {"uri": {"type": "string"}}}
        return types.ListToolsResult(
            tools=[
                types.Tool(name="grow", input_schema={"type": "object"}),
                types.Tool(name="touch", input_schema=schema),
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "grow":
            docs.append("doc://5")
            prompts.append("p5")
            await ctx.session.send_resource_list_changed()
            await ctx.session.send_prompt_list_changed()
            return types.CallToolResult(content=[types.TextContent(text="grown")])
        uri = str((params.arguments or {}).get("uri", ""))
        await ctx.session.send_resource_updated(uri)
        return types.CallToolResult(content=[types.TextContent(text=f"touched {uri}")])

    extras: dict[str, Any] = (
        {}
        if plain
        else {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe, "on_completion": complete}
    )
    return Server(
        "goldfive-test-catalog",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        **extras,
    )


async def serve(calls: str, plain: bool) -> None:
    server = build(calls, plain)
    changes = NotificationOptions(prompts_changed=not plain, resources_changed=not plain)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(changes))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="")
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    anyio.run(serve, args.calls, args.plain)
