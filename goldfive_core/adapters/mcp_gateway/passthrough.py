"""Resources, prompts and completions: passed through to the upstream that offers them (nobody is asked).

Lists are read page by page from every live upstream that declared the capability and answered as one list
(resources keep their URIs; prompts are named like tools: ``NAME__prompt`` with several upstreams). A request
about one item (``resources/read``, ``resources/subscribe``, ``prompts/get``, ``completion/complete``) goes to the
upstream that listed it — with one upstream offering the capability, to that one. An upstream's
``notifications/resources/list_changed``, ``notifications/prompts/list_changed`` and, for a URI the client
subscribed to, ``notifications/resources/updated`` are passed on (:meth:`Connections._notice`).

What the gateway declares is what its upstreams offer (:meth:`PassThrough.declare`): ``resources`` (with
``subscribe`` and ``listChanged`` when some upstream has them), ``prompts`` (``listChanged`` likewise) and
``completions`` only when some upstream declared them when the client connected.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client

from ..._util import shorten
from .upstreams import Connections, all_pages, subscribe

__all__ = ["PassThrough"]


class PassThrough:
    """The SDK server's handlers for resources, prompts and completions of one client connection."""

    def __init__(self, upstreams: Connections) -> None:
        self.upstreams = upstreams

    def handlers(self) -> dict[str, Any]:
        """The ``Server(...)`` handler arguments."""
        return {
            "on_list_resources": self.list_resources,
            "on_list_resource_templates": self.list_resource_templates,
            "on_read_resource": self.read_resource,
            "on_subscribe_resource": self.subscribe,
            "on_unsubscribe_resource": self.unsubscribe,
            "on_list_prompts": self.list_prompts,
            "on_get_prompt": self.get_prompt,
            "on_completion": self.complete,
        }

    def declare(self, capabilities: types.ServerCapabilities) -> None:
        """Declare to the client what the live upstreams offer (and nothing they do not)."""
        resources = [self._caps(client).resources for _, client in self.upstreams.serving("resources")]
        prompts = [self._caps(client).prompts for _, client in self.upstreams.serving("prompts")]
        capabilities.resources = (
            types.ResourcesCapability(
                subscribe=any(r is not None and r.subscribe for r in resources),
                list_changed=any(r is not None and r.list_changed for r in resources),
            )
            if resources
            else None
        )
        capabilities.prompts = (
            types.PromptsCapability(list_changed=any(p is not None and p.list_changed for p in prompts))
            if prompts
            else None
        )
        capabilities.completions = types.CompletionsCapability() if self.upstreams.serving("completions") else None

    @staticmethod
    def _caps(client: Client) -> types.ServerCapabilities:
        caps = client.session.server_capabilities
        return caps if caps is not None else types.ServerCapabilities()

    # -- resources ---------------------------------------------------------------------------------------------
    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        resources: list[types.Resource] = []
        for name, client in self.upstreams.serving("resources"):
            listed = await all_pages(client.session.list_resources, "resources")
            for resource in listed:
                self.upstreams.resources[str(resource.uri)] = name
                resources.append(resource)
        return types.ListResourcesResult(resources=resources)

    async def list_resource_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        templates: list[types.ResourceTemplate] = []
        for name, client in self.upstreams.serving("resources"):
            for template in await all_pages(client.session.list_resource_templates, "resource_templates"):
                self.upstreams.templates[str(template.uri_template)] = name
                templates.append(template)
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        _, client = self._owner_of(uri)
        return await client.session.read_resource(uri)

    async def subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        owner, client = self._owner_of(uri)
        caps = self._caps(client).resources
        if caps is None or not caps.subscribe:
            raise _mcp_error(types.INVALID_PARAMS, f"the MCP server of {shorten(uri, 120)!r} offers no subscriptions")
        await subscribe(client, uri)
        self.upstreams.subscribed.setdefault(owner, set()).add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        owner, client = self._owner_of(uri)
        self.upstreams.subscribed.get(owner, set()).discard(uri)  # no more updates are passed on, whatever it says
        params = types.UnsubscribeRequestParams(uri=uri)  # the 2025 request (the SDK's helper warns of the 2026 era)
        await client.session.send_request(types.UnsubscribeRequest(params=params), types.EmptyResult)
        return types.EmptyResult()

    def _owner_of(self, uri: str) -> tuple[str, Client]:
        """The upstream that listed ``uri`` (or the only one offering resources) and its client."""
        owner = self.upstreams.resources.get(uri)
        if owner is None:
            serving = self.upstreams.serving("resources")
            owner = serving[0][0] if len(serving) == 1 else None
        client = self.upstreams.client(owner) if owner is not None else None
        if owner is None or client is None:
            raise _mcp_error(types.INVALID_PARAMS, f"unknown resource {shorten(uri, 120)!r} (list resources first)")
        return owner, client

    # -- prompts -----------------------------------------------------------------------------------------------
    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        prompts: list[types.Prompt] = []
        for name, client in self.upstreams.serving("prompts"):
            for prompt in await all_pages(client.session.list_prompts, "prompts"):
                exposed = self.upstreams.exposed(name, prompt.name)
                self.upstreams.prompts[exposed] = (name, prompt)
                prompts.append(prompt.model_copy(update={"name": exposed}))
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        found = self.upstreams.prompts.get(params.name)
        client = self.upstreams.client(found[0]) if found else None
        if found is None or client is None:
            raise _mcp_error(types.INVALID_PARAMS, f"unknown prompt {shorten(params.name, 80)!r} (list prompts first)")
        return await client.session.get_prompt(found[1].name, params.arguments)

    # -- completions -------------------------------------------------------------------------------------------
    async def complete(self, ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        """``completion/complete`` for a prompt's or a resource template's argument, asked of the upstream that
        listed it (under its own name for the prompt); one that offers no completions completes nothing."""
        ref = params.ref
        owner: str | None
        if isinstance(ref, types.PromptReference):
            found = self.upstreams.prompts.get(ref.name)
            if found is None:
                raise _mcp_error(types.INVALID_PARAMS, f"unknown prompt {shorten(ref.name, 80)!r} (list prompts first)")
            owner = found[0]
            params = params.model_copy(update={"ref": ref.model_copy(update={"name": found[1].name})})
        else:
            uri = str(ref.uri)
            owner = self.upstreams.templates.get(uri) or self.upstreams.resources.get(uri)
            if owner is None:
                serving = self.upstreams.serving("resources")
                owner = serving[0][0] if len(serving) == 1 else None
            if owner is None:
                raise _mcp_error(
                    types.INVALID_PARAMS, f"unknown resource template {shorten(uri, 120)!r} (list templates first)"
                )
        client = self.upstreams.client(owner)
        if client is None:
            raise _mcp_error(types.INVALID_PARAMS, f"its MCP server {owner!r} {self.upstreams.why_not(owner)}")
        if self._caps(client).completions is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        result: types.CompleteResult = await client.session.send_request(
            types.CompleteRequest(params=params), types.CompleteResult
        )
        return result


def _mcp_error(code: int, message: str) -> Exception:
    from mcp import MCPError

    return MCPError(code=code, message=message)
