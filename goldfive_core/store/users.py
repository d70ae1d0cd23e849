"""People who log in to ``goldfive serve``: roles, policy groups, one-time tokens, slow hashes.

A user has one permission role (:data:`ROLES`: what they may do) and any number of policy groups
(``finance``, ``ops``): a policy rule's ``role:finance`` approvers match the users in group finance as
well as those whose role is called finance. A group never grants a permission: a viewer in group
finance still may not decide.

Stdlib only (``hashlib.scrypt``), so the ``goldfive users`` command works without the server
extra. A token is ``gf5_<id>_<secret>``: the id finds the user, the secret is checked against
a scrypt hash; the token itself is shown once and never stored.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

from .._util import now_ms
from ..errors import UnknownUserError, UserError, UserExistsError
from .base import Store, UserRow

__all__ = [
    "PERMISSIONS",
    "ROLES",
    "NewToken",
    "UnknownUserError",
    "UserError",
    "UserExistsError",
    "MAX_GROUPS",
    "add_user",
    "check_group",
    "check_name",
    "disable_user",
    "enable_user",
    "hash_token",
    "parse_token",
    "role_allows",
    "rotate_user",
    "user_json",
    "set_groups",
    "verify_token",
]

ROLES: dict[str, frozenset[str]] = {
    "viewer": frozenset({"read"}),
    "approver": frozenset({"read", "decide", "control"}),
    "admin": frozenset({"read", "decide", "control", "manage_users"}),
    "agent": frozenset({"agent"}),
}
"""Role → what it may do. A new role (a policy's approver group) is one more entry.

``agent`` is for agent processes that reach ``goldfive serve`` over HTTP
(:class:`goldfive_core.store.http.HttpChannel`): it may write its own runs' events, read its own runs' control
messages and execution-ledger records, and nothing else — not read the inbox, never decide or control a run.
"""

PERMISSIONS = ("read", "decide", "control", "manage_users", "agent")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_GROUPS = 32
"""How many policy groups one user may be in."""
_TOKEN = re.compile(r"^gf5_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")

# scrypt cost: 16 MiB and ~50 ms per check. The secret has 256 random bits, so the cost is a
# guard against a stolen table, not against guessing; verified tokens are cached by the server.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class NewToken:
    """A user and their new token (shown once)."""

    user: UserRow
    token: str


def role_allows(role: str, permission: str, roles: Mapping[str, frozenset[str]] = ROLES) -> bool:
    """Whether ``role`` grants ``permission``."""
    return permission in roles.get(role, frozenset())


def check_name(name: str) -> str:
    """The name if it is a valid user name, else :class:`UserError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(
            f"bad user name {name[:80]!r}: use 1-64 letters, digits and . _ @ + - (starting with a letter or digit)"
        )
    return name


def check_group(group: str) -> str:
    """The group if it is a valid policy group name, else :class:`UserError`.

    A group may not be called like a permission role (``admin``...): ``role:admin`` in a rule would then
    name people whose permission role is not admin.
    """
    if not isinstance(group, str) or not _GROUP.match(group):
        raise UserError(
            f"bad group name {str(group)[:80]!r}: use 1-64 letters, digits and . _ - (starting with a letter or digit)"
        )
    if group in ROLES:
        raise UserError(f"group {group!r} has the name of a permission role; give the group another name")
    return group


def _check_groups(groups: Iterable[str]) -> tuple[str, ...]:
    out = tuple(sorted({check_group(g) for g in groups}))
    if len(out) > MAX_GROUPS:
        raise UserError(f"a user may be in at most {MAX_GROUPS} groups, not {len(out)}")
    return out


def hash_token(secret: str, *, n: int = _SCRYPT_N) -> str:
    """``scrypt$n$r$p$salt$hash`` of a token secret."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=n, r=_SCRYPT_R, p=_SCRYPT_P, maxmem=64 * 1024 * 1024)
    b64 = base64.b64encode
    return f"scrypt${n}${_SCRYPT_R}${_SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_token(secret: str, stored: str) -> bool:
    """Whether ``secret`` matches a hash made by :func:`hash_token` (constant-time compare)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=64 * 1024 * 1024,
            dklen=len(expected),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


def parse_token(token: str) -> tuple[str, str] | None:
    """``(token_id, secret)`` of a well-formed token, else None."""
    match = _TOKEN.match(token.strip()) if isinstance(token, str) else None
    return (match.group(1), match.group(2)) if match else None


def _mint() -> tuple[str, str, str]:
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    while len(secret) != 43:  # token_urlsafe(32) is 43 characters; keep the shape exact
        secret = secrets.token_urlsafe(32)
    return token_id, secret, f"gf5_{token_id}_{secret}"


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise UserError(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    return role


def add_user(store: Store, name: str, role: str, groups: Iterable[str] = ()) -> NewToken:
    """Create a user with a new token (in ``groups``); :class:`UserError` when the name is taken or invalid."""
    check_name(name)
    _check_role(role)
    in_groups = _check_groups(groups)
    token_id, secret, token = _mint()
    at = now_ms()
    user = UserRow(
        name=name,
        role=role,
        token_id=token_id,
        token_hash=hash_token(secret),
        disabled=False,
        created_at_ms=at,
        updated_at_ms=at,
        failed_logins=0,
        locked_until_ms=0,
        groups=in_groups,
    )
    if not store.add_user(user):
        raise UserExistsError(f"user {name!r} exists already (goldfive users rotate {name} gives a new token)")
    return NewToken(user=user, token=token)


def rotate_user(store: Store, name: str) -> NewToken:
    """Give a user a new token: the old one stops working and their web sessions end. A disabled user stays
    disabled (the new token works only after :func:`enable_user`): a rotate never gives access back."""
    token_id, secret, token = _mint()
    if not store.update_user(name, token_id=token_id, token_hash=hash_token(secret)):
        raise UnknownUserError(f"unknown user {name!r}")
    user = store.user(name)
    if user is None:  # deleted in between
        raise UnknownUserError(f"unknown user {name!r}")
    return NewToken(user=user, token=token)


def disable_user(store: Store, name: str) -> UserRow:
    """Disable a user: their token stops working and their web sessions end."""
    return _set_disabled(store, name, disabled=True)


def enable_user(store: Store, name: str) -> UserRow:
    """Enable a disabled user: their current token works again (an explicit step; a rotate never does this)."""
    return _set_disabled(store, name, disabled=False)


def _set_disabled(store: Store, name: str, *, disabled: bool) -> UserRow:
    if not store.update_user(name, disabled=disabled):
        raise UnknownUserError(f"unknown user {name!r}")
    user = store.user(name)
    if user is None:  # deleted in between
        raise UnknownUserError(f"unknown user {name!r}")
    return user


def set_groups(store: Store, name: str, *, add: Iterable[str] = (), remove: Iterable[str] = ()) -> UserRow:
    """Add a user to / remove them from policy groups; the user as stored after. Takes effect at once: the
    server reads a user's groups on every decision."""
    added, removed = _check_groups(add), _check_groups(remove)
    # Read, change and write in one transaction: two admins changing one user's groups at once both count.
    if store.change_user_groups(name, lambda now: _check_groups((set(now) | set(added)) - set(removed))) is None:
        raise UnknownUserError(f"unknown user {name!r}")
    after = store.user(name)
    if after is None:
        raise UnknownUserError(f"unknown user {name!r}")
    return after


def user_json(user: UserRow) -> dict[str, Any]:
    """What is shown of a user (``goldfive users list --json``, ``GET /api/users``): never a token or its hash."""
    return {
        "name": user.name,
        "role": user.role,
        "groups": list(user.groups),
        "disabled": user.disabled,
        "created_at_ms": user.created_at_ms,
    }
