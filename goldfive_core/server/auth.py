"""Who is asking: bearer tokens, the web session cookie, CSRF, and login throttling.

* API clients send ``Authorization: Bearer gf5_…``. The token's id finds the user; its secret is
  checked against the scrypt hash once per process and then cached (keyed by a SHA-256 of the
  token and the stored hash, so a rotated or disabled user is refused on the next request).
* The web page logs in with name + token and gets a cookie holding a random session id and an
  HMAC of it (the key is derived from the server's signing key, so every ``serve`` process sharing
  that key accepts it). The store keeps only a hash of the id, with the user and a CSRF token.
* A write authenticated by the cookie must carry ``X-CSRF-Token`` (bound to the session) and come
  from the same origin (``Sec-Fetch-Site`` / ``Origin``); bearer requests are not browser-driven.
* Failed logins are counted per account (growing lockouts, stored, so every process sees them)
  and per client address (in memory).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import concurrent.futures
import dataclasses
import functools
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from starlette.requests import HTTPConnection

from .._util import now_ms
from ..store.base import Store, UserRow, WebSession
from ..store.users import ROLES, parse_token, role_allows, verify_token

__all__ = ["COOKIE", "CSRF_HEADER", "AuthError", "Authenticator", "User"]

COOKIE = "goldfive_session"
CSRF_HEADER = "x-csrf-token"
SESSION_TTL_MS = 12 * 3600 * 1000

T = TypeVar("T")

_ACCOUNT_FREE_FAILURES = 5
_ACCOUNT_MAX_LOCK_S = 15 * 60
_ADDR_WINDOW_S = 300.0
_ADDR_MAX_FAILURES = 30
_CACHE_MAX = 1024


_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="goldfive-auth")
"""Store look-ups of authentication run here: decisions waiting for agents' acks hold threads of the default
pool, and the agents' requests that carry those acks must still get through authentication."""


async def _lookup(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(_POOL, functools.partial(fn, *args, **kwargs))


class AuthError(Exception):
    """A request is refused: ``status`` 401 (who are you), 403 (not allowed) or 429 (slow down)."""

    def __init__(self, status: int, message: str, *, retry_after_s: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class User:
    """The logged-in principal of a request."""

    name: str
    role: str
    channel: str
    """``web`` (the session cookie) or ``api`` (a bearer token)."""
    csrf: str = ""
    session_hash: str = ""

    def can(self, permission: str, roles: Mapping[str, frozenset[str]] = ROLES) -> bool:
        """Whether this user's role grants ``permission``."""
        return role_allows(self.role, permission, roles)


class Authenticator:
    """Authenticates requests against the users in ``store``; one per app."""

    def __init__(self, store: Store, *, cookie_key: bytes, secure_cookies: bool = False) -> None:
        self.store = store
        self._cookie_key = cookie_key
        self.secure_cookies = secure_cookies
        self._verified: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._addr_failures: dict[str, collections.deque[float]] = {}

    # -- requests ---------------------------------------------------------------------------------------------
    async def authenticate(self, conn: HTTPConnection) -> User:
        """The user behind a request, or :class:`AuthError` 401."""
        header = conn.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise AuthError(401, "the Authorization header must be 'Bearer <token>'")
            user = await self._by_token(token.strip())
            if user is None:
                raise AuthError(401, "the bearer token is not valid (unknown, rotated, or its user is disabled)")
            return User(name=user.name, role=user.role, channel="api")
        cookie = conn.cookies.get(COOKIE)
        if cookie:
            found = await self._by_cookie(cookie)
            if found is not None:
                return found
            raise AuthError(401, "your session has ended; log in again")
        raise AuthError(401, "log in first: send 'Authorization: Bearer <token>' or use the login page")

    async def _by_token(self, token: str) -> UserRow | None:
        parsed = parse_token(token)
        if parsed is None:
            return None
        token_id, secret = parsed
        user = await _lookup(self.store.user_by_token_id, token_id)
        if user is None or user.disabled:
            return None
        key = hashlib.sha256(f"{token}\n{user.token_hash}".encode()).hexdigest()
        if key in self._verified:
            self._verified.move_to_end(key)
            return user
        if not await _lookup(verify_token, secret, user.token_hash):
            return None
        self._verified[key] = user.name
        while len(self._verified) > _CACHE_MAX:
            self._verified.popitem(last=False)
        return user

    def _mac(self, sid: str) -> str:
        return hmac.new(self._cookie_key, sid.encode(), hashlib.sha256).hexdigest()[:32]

    async def _by_cookie(self, cookie: str) -> User | None:
        sid, _, mac = cookie.partition(".")
        if not sid or not mac or not hmac.compare_digest(mac, self._mac(sid)):
            return None
        id_hash = hashlib.sha256(sid.encode()).hexdigest()
        session = await _lookup(self.store.web_session, id_hash)
        if session is None:
            return None
        user = await _lookup(self.store.user, session.user_name)
        if user is None or user.disabled:
            return None
        return User(name=user.name, role=user.role, channel="web", csrf=session.csrf, session_hash=id_hash)

    # -- CSRF -----------------------------------------------------------------------------------------------------
    @staticmethod
    def check_same_origin(conn: HTTPConnection) -> None:
        """Refuse a browser request that another site made (Fetch Metadata, else Origin vs Host)."""
        site = conn.headers.get("sec-fetch-site")
        if site is not None:
            if site not in ("same-origin", "none"):
                raise AuthError(403, f"cross-site request refused (Sec-Fetch-Site: {site[:40]})")
            return
        origin = conn.headers.get("origin")
        if origin is None or origin == "null":
            if origin == "null":
                raise AuthError(403, "cross-site request refused (Origin: null)")
            return  # not a browser
        host = conn.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise AuthError(403, f"cross-site request refused (Origin {origin[:80]!r} is not this server)")

    def check_csrf(self, conn: HTTPConnection, user: User) -> None:
        """A cookie-authenticated write needs the session's CSRF token and the same origin."""
        if user.channel != "web":
            return
        self.check_same_origin(conn)
        sent = conn.headers.get(CSRF_HEADER, "")
        if not sent or not hmac.compare_digest(sent, user.csrf):
            raise AuthError(403, "missing or wrong X-CSRF-Token header (reload the page)")

    # -- login -----------------------------------------------------------------------------------------------------
    def _addr_check(self, addr: str) -> None:
        window = self._addr_failures.get(addr)
        if window is None:
            return
        cutoff = time.monotonic() - _ADDR_WINDOW_S
        while window and window[0] < cutoff:
            window.popleft()
        if len(window) >= _ADDR_MAX_FAILURES:
            wait = int(window[0] - cutoff) + 1
            raise AuthError(429, f"too many failed logins from this address; try again in {wait} s", retry_after_s=wait)

    def _addr_fail(self, addr: str) -> None:
        self._addr_failures.setdefault(addr, collections.deque()).append(time.monotonic())
        if len(self._addr_failures) > 10_000:  # bound memory under a spray of addresses
            self._addr_failures.pop(next(iter(self._addr_failures)))

    async def login(self, name: str, token: str, *, addr: str) -> tuple[User, str]:
        """Check name + token; returns the user and the cookie value of a new session."""
        self._addr_check(addr)
        user = await _lookup(self.store.user, name) if name else None
        now = now_ms()
        if user is not None and user.locked_until_ms > now:
            wait = (user.locked_until_ms - now) // 1000 + 1
            raise AuthError(429, f"too many failed logins for {name!r}; try again in {wait} s", retry_after_s=wait)
        parsed = parse_token(token)
        ok = (
            user is not None
            and not user.disabled
            and parsed is not None
            and parsed[0] == user.token_id
            and await _lookup(verify_token, parsed[1], user.token_hash)
        )
        if not ok or user is None:
            self._addr_fail(addr)
            if user is not None:
                failures = user.failed_logins + 1
                lock_s = 0
                if failures >= _ACCOUNT_FREE_FAILURES:
                    lock_s = min(2 ** (failures - _ACCOUNT_FREE_FAILURES), _ACCOUNT_MAX_LOCK_S)
                await _lookup(
                    self.store.note_login, user.name, ok=False, lock_until_ms=now + lock_s * 1000 if lock_s else 0
                )
            raise AuthError(401, "wrong name or token (or the user is disabled)")
        if user.failed_logins:
            await _lookup(self.store.note_login, user.name, ok=True)
        sid = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        id_hash = hashlib.sha256(sid.encode()).hexdigest()
        session = WebSession(
            id_hash=id_hash, user_name=user.name, csrf=csrf, created_at_ms=now, expires_at_ms=now + SESSION_TTL_MS
        )
        await _lookup(self.store.add_web_session, session)
        found = User(name=user.name, role=user.role, channel="web", csrf=csrf, session_hash=id_hash)
        return found, f"{sid}.{self._mac(sid)}"

    async def logout(self, user: User) -> None:
        """End the user's web session."""
        if user.session_hash:
            await _lookup(self.store.end_web_session, user.session_hash)


def derive_cookie_key(signature_of_label: bytes) -> bytes:
    """The cookie HMAC key: a hash of the signing key's (deterministic) signature of a fixed label."""
    return hashlib.sha256(b"goldfive-cookie-key\n" + base64.b64encode(signature_of_label)).digest()
