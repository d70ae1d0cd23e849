"""Who is asking: bearer tokens, the web session cookie, CSRF, and limits on failed attempts.

* API clients send ``Authorization: Bearer gf5_…``. The token's id finds the user; its secret is
  checked against the scrypt hash once per process and then cached (keyed by a SHA-256 of the
  token, holding the stored hash it matched, so a rotated or disabled user is refused on the next request).
* A server that checked a token gives its agent a *pass* (``X-Goldfive-Pass`` on the stream's answer): an HMAC,
  under a key derived from the signing key, of the token's SHA-256, the stored hash it matched and an expiry. The
  agent sends it back with its token; any ``serve`` sharing the key takes the token on it without scrypt (the
  token's user is still looked up on every request, and a rotated or disabled user's pass no longer fits). A pass
  is worth nothing without its token: it only spares a fleet's agents, failing over to another server, one scrypt
  check each there (hundreds queued behind each other: their runs aged past the crash window meanwhile).
* The web page logs in with name + token and gets a cookie holding a random session id and an
  HMAC of it (the key is derived from the server's signing key, so every ``serve`` process sharing
  that key accepts it). The store keeps only a hash of the id, with the user and a CSRF token.
* Every request authenticated by the cookie must come from the same origin (``Sec-Fetch-Site`` /
  ``Origin``), and a write must also carry ``X-CSRF-Token`` (bound to the session); bearer requests
  are not browser-driven.
* A wrong secret for a real token id is limited per (token id, client address): after
  :data:`WRONG_SECRET_BURST` of them, one more every :data:`WRONG_SECRET_REFILL_S` seconds; beyond that
  the request is refused (429) *before* any scrypt work. A token this process has already verified is
  never refused by a limit. Any other failed login (unknown name, a token that is not that user's) is
  refused without scrypt and only counted per client address. No limit locks an account: the right
  token, from another address or once verified here, always gets in.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping, Sequence

from starlette.requests import HTTPConnection

from .._util import now_ms
from ..errors import ApiError
from ..store.agents import PASS_HEADER
from ..store.base import Store, StoreError, UserRow, WebSession
from ..store.users import ROLES, parse_token, role_allows, verify_token
from .batching import Coalesced
from .threads import AUTH, SECRETS, ServerThreads
from .throttle import AttemptLimiter, client_key

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "LOGIN_FAILURE_BURST",
    "WRONG_SECRET_BURST",
    "WRONG_SECRET_REFILL_S",
    "AuthError",
    "Authenticator",
    "User",
]

COOKIE = "goldfive_session"
CSRF_HEADER = "x-csrf-token"
SESSION_TTL_MS = 12 * 3600 * 1000
PASS_TTL_MS = SESSION_TTL_MS
"""How long an agent's pass is taken (by the issuing server's clock); then its token is checked by scrypt again."""

logger = logging.getLogger(__name__)

WRONG_SECRET_BURST = 5
"""Wrong secrets for one real token id from one client address before the limit applies."""
WRONG_SECRET_REFILL_S = 10.0
"""After the burst, one more wrong-secret attempt per (token id, address) this often."""
LOGIN_FAILURE_BURST = 30
"""Other failed logins (unknown name, someone else's token) from one address before 429s; one more every 10 s."""
_LOGIN_FAILURE_REFILL_S = 10.0
_PASS_VERSION = "p1"
_CACHE_MAX = 65_536
"""Tokens whose secret was verified, kept (LRU): one per agent of a fleet, so a beat never pays a scrypt check."""


def _refuse_if_limited(token_id: str, wait: int) -> None:
    if wait:
        raise AuthError(
            429,
            f"too many wrong secrets for token id {token_id} from this address; try again in {wait} s",
            retry_after_s=wait,
        )


AuthError = ApiError
"""A refused login or request: ``status`` 401 (who are you), 403 (not allowed) or 429 (slow down, with
``retry_after_s``). The server's one refusal type under the name authentication code raises it by."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class User:
    """The logged-in principal of a request."""

    name: str
    role: str
    channel: str
    """``web`` (the session cookie) or ``api`` (a bearer token)."""
    csrf: str = ""
    session_hash: str = ""
    credential: str = dataclasses.field(default="", repr=False, compare=False)
    """The bearer token or cookie value the request came with: open streams re-check it (never shown)."""

    def can(self, permission: str, roles: Mapping[str, frozenset[str]] = ROLES) -> bool:
        """Whether this user's role grants ``permission``."""
        return role_allows(self.role, permission, roles)


class Authenticator:
    """Authenticates requests against the users in ``store``; one per app."""

    def __init__(
        self, store: Store, *, cookie_key: bytes, secure_cookies: bool = False, threads: ServerThreads | None = None
    ) -> None:
        self.store = store
        self.threads = threads if threads is not None else ServerThreads()
        """Where its store look-ups run (the :data:`~.threads.AUTH` pool): decisions waiting for agents' acks
        hold other threads, and the agents' requests that carry those acks must still get through here."""
        self._cookie_key = cookie_key
        self._pass_key = hmac.new(cookie_key, b"goldfive-agent-pass-key", hashlib.sha256).digest()
        """Agents' passes are made under a key of their own (a pass is never a cookie's MAC, nor one its)."""
        self.secure_cookies = secure_cookies
        self._verified: collections.OrderedDict[str, str] = collections.OrderedDict()
        """SHA-256 of a token → the stored hash its secret matched (LRU, at most ``_CACHE_MAX``)."""
        self.tokens: Coalesced[str, UserRow] = Coalesced(self._users_of, name="goldfive-serve-token-lookups")
        """Each request's token look-up, made together with those of the requests that arrived meanwhile: one
        read per round trip, not one per request (thousands of agents' acks and beats)."""
        self._checks: dict[str, asyncio.Future[bool]] = {}
        """Scrypt checks under way, by the token's SHA-256: concurrent requests with one token share one."""
        self.wrong_secrets = AttemptLimiter(burst=WRONG_SECRET_BURST, refill_s=WRONG_SECRET_REFILL_S)
        self.failed_logins = AttemptLimiter(burst=LOGIN_FAILURE_BURST, refill_s=_LOGIN_FAILURE_REFILL_S)

    # -- requests ---------------------------------------------------------------------------------------------
    async def authenticate(self, conn: HTTPConnection) -> User:
        """The user behind a request, or :class:`AuthError` 401 (429 while its token id is limited)."""
        header = conn.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                raise AuthError(401, "the Authorization header must be 'Bearer <token>'")
            user = await self._by_token(
                token,
                addr=client_key(conn.client.host if conn.client else None),
                presented=conn.headers.get(PASS_HEADER, ""),
            )
            if user is None:
                raise AuthError(401, "the bearer token is not valid (unknown, rotated, or its user is disabled)")
            return User(name=user.name, role=user.role, channel="api", credential=token)
        cookie = conn.cookies.get(COOKIE)
        if cookie:
            found = await self._by_cookie(cookie)
            if found is not None:
                return found
            raise AuthError(401, "your session has ended; log in again")
        raise AuthError(401, "log in first: send 'Authorization: Bearer <token>' or use the login page")

    async def still_valid(self, user: User, permission: str) -> bool:
        """Whether the credential ``user`` came with still grants ``permission`` (an open stream's re-check).
        An error while checking is a no: fail closed."""
        try:
            if user.channel == "api":
                row = await self._by_token(user.credential, addr=None)
                return row is not None and row.name == user.name and role_allows(row.role, permission)
            found = await self._by_cookie(user.credential)
            return found is not None and found.name == user.name and found.can(permission)
        except StoreError as exc:
            logger.warning("re-checking %r's open stream: the store is unavailable (%s); ending it", user.name, exc)
            return False

    async def still_valid_all(self, leases: Sequence[tuple[User, str]]) -> list[bool]:
        """:meth:`still_valid` of many ``(user, permission)`` at once: every bearer token in one store look-up
        (an open stream per agent re-checks thousands of tokens a second). An error while checking is a no."""
        parsed = {user.credential: parse_token(user.credential) for user, _ in leases if user.channel == "api"}
        ids = [p[0] for p in parsed.values() if p is not None]
        try:
            rows = await self.threads.run(AUTH, self.store.users_by_token_ids, ids) if ids else {}
        except StoreError as exc:
            logger.warning("re-checking open streams: the store is unavailable (%s); ending them", exc)
            return [False] * len(leases)
        verdicts: list[bool] = []
        for user, permission in leases:
            if user.channel != "api":
                verdicts.append(await self.still_valid(user, permission))
                continue
            token = parsed[user.credential]
            row = rows.get(token[0]) if token is not None else None
            ok = row is not None and not row.disabled and row.name == user.name and role_allows(row.role, permission)
            if ok and token is not None and row is not None:
                digest = hashlib.sha256(user.credential.encode()).hexdigest()
                ok = await self._secret_matches(digest, token[1], row.token_hash, token_id=token[0], key=None)
            verdicts.append(ok)
        return verdicts

    async def _by_token(self, token: str, *, addr: str | None, presented: str = "") -> UserRow | None:
        """The user of a valid token. With ``addr``, a secret not verified yet is subject to the (token id,
        address) limit: a limited one is refused with 429 before the store or scrypt is asked. ``presented``: the
        pass the request carried (see :meth:`pass_for`), taken instead of a scrypt check when it fits."""
        parsed = parse_token(token)
        if parsed is None:
            return None
        token_id, secret = parsed
        digest = hashlib.sha256(token.encode()).hexdigest()
        key = f"{token_id} {addr}" if addr is not None else None
        if key is not None and digest not in self._verified:
            _refuse_if_limited(token_id, self.wrong_secrets.wait(key))
        user = await self.tokens.get(token_id)  # looked up after this request arrived: a disable is seen at once
        if user is None or user.disabled:
            return None
        if presented and digest not in self._verified and self._pass_fits(presented, digest, user.token_hash):
            self._remember(digest, user.token_hash)  # this process takes the token as checked from now on
        if not await self._secret_matches(digest, secret, user.token_hash, token_id=token_id, key=key):
            return None
        return user

    async def _users_of(self, token_ids: Sequence[str]) -> dict[str, UserRow]:
        return await self.threads.run(AUTH, self.store.users_by_token_ids, token_ids)

    async def _secret_matches(self, digest: str, secret: str, stored: str, *, token_id: str, key: str | None) -> bool:
        """Whether the secret matches the ``stored`` hash: from the cache, else by one scrypt check per token at
        a time (concurrent requests with the same token share it). A new check takes a place of ``key``'s limit
        first (so concurrent wrong secrets cannot all slip through), given back unless the secret was wrong."""
        matched = self._verified.get(digest)
        if matched is not None:
            if matched == stored:
                self._verified.move_to_end(digest)
                return True
            del self._verified[digest]  # the stored hash changed under this token id: check afresh
        check = self._checks.get(digest)
        if check is None:
            if key is not None:
                _refuse_if_limited(token_id, self.wrong_secrets.take(key))
            check = asyncio.ensure_future(self.threads.run(SECRETS, verify_token, secret, stored))
            self._checks[digest] = check

            def settle(done: asyncio.Future[bool]) -> None:
                self._checks.pop(digest, None)
                if done.cancelled() or done.exception() is not None or not done.result():
                    return  # a wrong secret (or a failed check) keeps its place of the limit taken
                self._remember(digest, stored)
                if key is not None:
                    self.wrong_secrets.give_back(key)

            check.add_done_callback(settle)
        return await asyncio.shield(check)

    def _remember(self, digest: str, stored: str) -> None:
        self._verified[digest] = stored
        self._verified.move_to_end(digest)
        while len(self._verified) > _CACHE_MAX:
            self._verified.popitem(last=False)

    # -- agents' passes ---------------------------------------------------------------------------------------
    def _pass_mac(self, digest: str, stored: str, expires_ms: int) -> str:
        message = f"goldfive-agent-pass\n{digest}\n{stored}\n{expires_ms}".encode()
        return hmac.new(self._pass_key, message, hashlib.sha256).hexdigest()

    def pass_for(self, user: User) -> str:
        """A pass for the bearer token ``user`` came with ("" when this process holds no check of it): sent back
        with the token, it spares every server sharing the key file a scrypt check of its own."""
        if user.channel != "api":
            return ""
        digest = hashlib.sha256(user.credential.encode()).hexdigest()
        stored = self._verified.get(digest)
        if stored is None:
            return ""
        expires_ms = now_ms() + PASS_TTL_MS
        return f"{_PASS_VERSION}.{expires_ms}.{self._pass_mac(digest, stored, expires_ms)}"

    def _pass_fits(self, presented: str, digest: str, stored: str) -> bool:
        """Whether ``presented`` is a pass this key made for the token of SHA-256 ``digest`` while it matched the
        ``stored`` hash (the user's current one), and has not expired. Anything else: no (scrypt decides)."""
        version, _, rest = presented.partition(".")
        expires, _, mac = rest.partition(".")
        if version != _PASS_VERSION or not (expires.isascii() and expires.isdigit()) or len(expires) > 16:
            return False  # junk (a '²' is a digit to isdigit, not to int): scrypt decides
        if int(expires) <= now_ms():
            return False
        return hmac.compare_digest(mac.encode(), self._pass_mac(digest, stored, int(expires)).encode())

    def _mac(self, sid: str) -> str:
        return hmac.new(self._cookie_key, sid.encode(), hashlib.sha256).hexdigest()[:32]

    async def _by_cookie(self, cookie: str) -> User | None:
        sid, _, mac = cookie.partition(".")
        if not sid or not mac or not hmac.compare_digest(mac.encode(), self._mac(sid).encode()):  # bytes: any header
            return None
        id_hash = hashlib.sha256(sid.encode()).hexdigest()
        session = await self.threads.run(AUTH, self.store.web_session, id_hash)
        if session is None:
            return None
        user = await self.threads.run(AUTH, self.store.user, session.user_name)
        if user is None or user.disabled:
            return None
        return User(
            name=user.name, role=user.role, channel="web", csrf=session.csrf, session_hash=id_hash, credential=cookie
        )

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

    def check_csrf(self, conn: HTTPConnection, user: User, *, write: bool) -> None:
        """A cookie-authenticated request must come from the same origin; a write also needs the session's
        CSRF token. Bearer requests are not checked (a browser cannot add the header on another site's behalf)."""
        if user.channel != "web":
            return
        self.check_same_origin(conn)
        if not write:
            return
        sent = conn.headers.get(CSRF_HEADER, "")
        if not sent or not hmac.compare_digest(sent.encode(), user.csrf.encode()):  # bytes: a header may be non-ASCII
            raise AuthError(403, "missing or wrong X-CSRF-Token header (reload the page)")

    # -- login -----------------------------------------------------------------------------------------------------
    async def login(self, name: str, token: str, *, addr: str) -> tuple[User, str]:
        """Check name + token; returns the user and the cookie value of a new session."""
        user = await self.threads.run(AUTH, self.store.user, name) if name else None
        parsed = parse_token(token)
        if user is None or user.disabled or parsed is None or parsed[0] != user.token_id:
            # Not this user's current token (the right one always has their token id): refused without scrypt,
            # counted per address only, so nobody else's failures can lock the right token out.
            wait = self.failed_logins.take(client_key(addr))
            if wait:
                raise AuthError(
                    429, f"too many failed logins from this address; try again in {wait} s", retry_after_s=wait
                )
            raise AuthError(401, "wrong name or token (or the user is disabled)")
        found = await self._by_token(token, addr=client_key(addr))
        if found is None or found.name != user.name:
            raise AuthError(401, "wrong name or token (or the user is disabled)")
        now = now_ms()
        sid = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(24)
        id_hash = hashlib.sha256(sid.encode()).hexdigest()
        session = WebSession(
            id_hash=id_hash, user_name=user.name, csrf=csrf, created_at_ms=now, expires_at_ms=now + SESSION_TTL_MS
        )
        await self.threads.run(AUTH, self.store.add_web_session, session)
        cookie = f"{sid}.{self._mac(sid)}"
        return User(
            name=user.name, role=user.role, channel="web", csrf=csrf, session_hash=id_hash, credential=cookie
        ), cookie

    async def logout(self, user: User) -> None:
        """End the user's web session."""
        if user.session_hash:
            await self.threads.run(AUTH, self.store.end_web_session, user.session_hash)


def derive_cookie_key(signature_of_label: bytes) -> bytes:
    """The cookie HMAC key: a hash of the signing key's (deterministic) signature of a fixed label."""
    return hashlib.sha256(b"goldfive-cookie-key\n" + base64.b64encode(signature_of_label)).digest()
