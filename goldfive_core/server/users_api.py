"""The admins' routes of ``goldfive serve``: list users, add one, rotate, disable, enable, change groups.

A rotate or disable ends the user's open streams at once (:class:`~goldfive_core.server.sessions.SessionWatch`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._util import shorten
from ..store import users as users_mod
from ..store.base import Store
from .auth import User
from .inputs import ApiError, names_field, only_fields, text_field
from .sessions import SessionWatch

__all__ = ["UsersApi"]


class UsersApi:
    """``/api/users`` (GET, POST) and ``/api/users/{name}/{action}`` over ``store``."""

    def __init__(
        self, store: Store, sessions: SessionWatch, body: Callable[[Request], Awaitable[dict[str, Any]]]
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.body = body
        """Reads a request's JSON body within the server's limits."""

    async def list(self, request: Request, user: User) -> Response:
        """Every user: name, role, groups, whether disabled (never a token)."""
        rows = await asyncio.to_thread(self.store.users)
        return JSONResponse({"users": [users_mod.user_json(u) for u in rows]})

    async def add(self, request: Request, user: User) -> Response:
        """A new user; its token is in this answer only."""
        body = await self.body(request)
        only_fields(body, ("name", "role", "groups"))
        name = text_field(body, "name", required=True, limit=64)
        role = text_field(body, "role", required=True, limit=32)
        groups = body.get("groups", [])
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ApiError(400, "groups is a list of group names")
        made = await asyncio.to_thread(users_mod.add_user, self.store, name, role, groups)
        return JSONResponse(
            {"name": made.user.name, "role": made.user.role, "groups": list(made.user.groups), "token": made.token},
            status_code=201,
        )

    async def act(self, request: Request, user: User) -> Response:
        """rotate, disable, enable, or groups (add / remove) of one user."""
        body = await self.body(request)
        name, action = request.path_params["name"], request.path_params["action"]
        if action == "groups":
            only_fields(body, ("add", "remove"))
            add, remove = names_field(body, "add"), names_field(body, "remove")
            if not add and not remove:
                raise ApiError(400, 'say which groups to "add" and/or "remove" (lists of names)')
            row = await asyncio.to_thread(users_mod.set_groups, self.store, name, add=add, remove=remove)
            return JSONResponse({"name": row.name, "role": row.role, "groups": list(row.groups)})
        if action == "rotate":  # the old token stops working: so do the streams opened with it
            made = await asyncio.to_thread(users_mod.rotate_user, self.store, name)
            self.sessions.end_user(name)
            shown = {"name": made.user.name, "role": made.user.role, "disabled": made.user.disabled}
            return JSONResponse({**shown, "token": made.token})
        if action == "disable":
            row = await asyncio.to_thread(users_mod.disable_user, self.store, name)
            self.sessions.end_user(name)
            return JSONResponse({"name": row.name, "role": row.role, "disabled": row.disabled})
        if action == "enable":  # never implied by a rotate: giving access back is a step of its own
            row = await asyncio.to_thread(users_mod.enable_user, self.store, name)
            return JSONResponse({"name": row.name, "role": row.role, "disabled": row.disabled})
        raise ApiError(404, f"unknown user action {shorten(action, 40)!r}: use rotate, disable, enable or groups")
