"""Starting ``goldfive serve``: open the store, load (or make) the signing key, make a first admin, run uvicorn."""

from __future__ import annotations

import gc
import logging
import os
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from .._util import env_seconds
from ..policy import Policy
from ..signing import TRUST_KEY_ENV, DecisionSigner, load_or_create_signing_key
from ..store.base import Store
from ..store.checkpoint import CheckpointWriter
from ..store.users import UserError, add_user
from .app import ServerConfig, create_app
from .connections import HEAD_TIMEOUT_S, KEEPALIVE_S, WRITE_TIMEOUT_S, deadline_protocol
from .inputs import BODY_TIMEOUT_S
from .notify import NotifyConfig
from .sessions import SESSION_RECHECK_S

__all__ = [
    "CHECKPOINT_FILE",
    "DEFAULT_KEY_PATH",
    "GC_THRESHOLDS",
    "first_admin",
    "serve",
    "signing_key_path",
    "uvicorn_config",
]

logger = logging.getLogger(__name__)

DEFAULT_KEY_PATH = Path("~/.config/goldfive/decision-key.pem")
"""Where the decision-signing key lives unless ``--key`` / ``GOLDFIVE_SIGNING_KEY`` says otherwise."""


CHECKPOINT_FILE = "audit-checkpoint.txt"
"""The signed checkpoint's file name beside the signing key, unless ``--checkpoint`` names another file."""


def uvicorn_config(app: Any, *, host: str, port: int) -> uvicorn.Config:
    """How ``goldfive serve`` runs uvicorn: quiet, and every phase of a connection bounded — a request head
    within ``GOLDFIVE_SERVE_HEAD_TIMEOUT_S`` (default 10), an idle keep-alive connection closed after
    ``GOLDFIVE_SERVE_KEEPALIVE_S`` (default 5), an answer left unread for ``GOLDFIVE_SERVE_WRITE_TIMEOUT_S``
    (default 60) dropped; the body's deadline is the app's (``body_timeout_s``). Every answer carries
    ``X-Content-Type-Options: nosniff``: the app's through its middleware, and the few written without the
    app (a 400 for a request h11 cannot parse, the head's 408) by :class:`DeadlineProtocol`."""
    head_s = env_seconds("GOLDFIVE_SERVE_HEAD_TIMEOUT_S", HEAD_TIMEOUT_S)
    write_s = env_seconds("GOLDFIVE_SERVE_WRITE_TIMEOUT_S", WRITE_TIMEOUT_S)
    keepalive_s = env_seconds("GOLDFIVE_SERVE_KEEPALIVE_S", KEEPALIVE_S)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        http=deadline_protocol(head_timeout_s=head_s, write_timeout_s=write_s),
        # No WebSocket routes: an upgrade request is an ordinary request of the app's (its answer, its headers),
        # never handed to a WebSocket library that would answer it with bytes of its own (403, no nosniff).
        ws="none",
        timeout_keep_alive=max(1, round(keepalive_s)),
        timeout_graceful_shutdown=max(1, round(env_seconds("GOLDFIVE_SERVE_STOP_GRACE_S", STOP_GRACE_S))),
    )


GC_THRESHOLDS = (10_000, 10, 10)
"""The cyclic garbage collector's thresholds in a ``goldfive serve`` process (Python's default: 700, 10, 10).

Each waiting agent's open stream keeps about 200 objects the collector tracks, so a server holding thousands holds
millions, and a full collection stops the event loop (and every thread, holding the GIL) for as long as it takes to
walk them: measured (``bench/_serve_timed.py``, 2 shared cores) two full collections a minute at 3,000 idle agents
(1.2 s the longest), four or five while 2,000 agents moved in from a killed server (2.3 s the longest, more than
half the survivor's CPU). Objects that live for seconds (a request under load, a stream's 30-second ping timer)
were promoted into the oldest generation by the young collections they outlived, and made full collections due.
With a young generation of 10,000 they mostly die young: no full collection in either measurement, at the price of
a little more garbage waiting (a young collection every 10,000 allocations, a few milliseconds)."""


STOP_GRACE_S = 5.0
"""How long a stopping server waits for requests in flight (``GOLDFIVE_SERVE_STOP_GRACE_S``) before it
cancels them. Event streams do not count: they are ended as soon as the stop begins."""


class _Server(uvicorn.Server):
    """uvicorn's server, ending the app's event streams first when it stops.

    uvicorn's graceful stop waits for every connection to finish, and an event stream never does: with one
    inbox tab open, Ctrl+C or SIGTERM waited until the tab was closed.
    """

    def __init__(self, config: uvicorn.Config, end_streams: Callable[[], Awaitable[None]]) -> None:
        super().__init__(config)
        self._end_streams = end_streams

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for listener in self.servers:  # no new stream may open while the open ones are ended
            listener.close()
        try:
            await self._end_streams()
        except Exception:  # stopping goes on whatever ending a stream raised
            logger.exception("goldfive serve: ending the event streams failed")
        await super().shutdown(sockets)


def signing_key_path(path: str | Path | None = None) -> Path:
    """``path``, else ``GOLDFIVE_SIGNING_KEY``, else :data:`DEFAULT_KEY_PATH` (expanded)."""
    chosen = path or os.environ.get("GOLDFIVE_SIGNING_KEY") or DEFAULT_KEY_PATH
    return Path(chosen).expanduser()


def first_admin(store: Store) -> str | None:
    """On a store without users, create ``admin`` (role admin) and return its token; else None."""
    if store.users():
        return None
    try:
        return add_user(store, "admin", "admin").token
    except UserError:  # another serve process made it first
        return None


def announce(
    store: Store,
    signer: DecisionSigner,
    key_path: Path,
    created: bool,
    url: str,
    out: TextIO = sys.stdout,
    *,
    checkpoints: CheckpointWriter | None = None,
) -> None:
    """Say where the inbox is, which key agents should trust, and (first start) the admin's token."""
    out.write(f"goldfive serve: the inbox is at {url} (store {store.url})\n")
    out.write(f"  decisions are signed with {'a new key at' if created else 'the key at'} {key_path}\n")
    out.write(f"  agents that should apply only decisions made here: {TRUST_KEY_ENV}={signer.trust_key.text()}\n")
    if checkpoints is not None:
        out.write(
            f"  signed audit checkpoints go to {checkpoints.path}; check the log with: "
            f"goldfive audit verify --checkpoint {checkpoints.path} --public-key {signer.trust_key.text()}\n"
        )
    token = first_admin(store)
    if token is not None:
        out.write("  first start: created user 'admin' (role admin); log in with name 'admin' and this token,\n")
        out.write("  shown once (more users: goldfive users add NAME --role approver):\n")
        out.write(f"{token}\n")
    else:
        out.write("  log in with a user's name and token (new users: goldfive users add NAME --role approver)\n")
    out.flush()


def serve(
    store: Store,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    key_path: str | Path | None = None,
    secure_cookies: bool = False,
    notify: NotifyConfig | None = None,
    policy: Policy | None = None,
    checkpoint_path: str | Path | None = None,
    checkpoint_every_s: float = 60.0,
    out: TextIO = sys.stdout,
) -> None:
    """Run the server until interrupted (blocking). ``policy``: who may decide each rule's requests.

    Every ``checkpoint_every_s`` seconds (0: never) the audit chain head is signed with the signing key
    into ``checkpoint_path`` (default: :data:`CHECKPOINT_FILE` beside the key), outside the database.
    """
    path = signing_key_path(key_path)
    signer, created = load_or_create_signing_key(path)
    checkpoints: CheckpointWriter | None = None
    if checkpoint_every_s > 0:
        checkpoints = CheckpointWriter(store, signer, Path(checkpoint_path or path.parent / CHECKPOINT_FILE))
    app = create_app(
        store,
        ServerConfig(
            signer=signer,
            secure_cookies=secure_cookies,
            notify=notify,
            policy=policy,
            checkpoints=checkpoints,
            checkpoint_every_s=checkpoint_every_s,
            body_timeout_s=env_seconds("GOLDFIVE_SERVE_BODY_TIMEOUT_S", BODY_TIMEOUT_S),
            # The open streams' periodic re-check, a safety net: access news ends them at once.
            session_recheck_s=env_seconds("GOLDFIVE_SERVE_SESSION_RECHECK_S", SESSION_RECHECK_S),
        ),
    )
    server = _Server(uvicorn_config(app, host=host, port=port), app.state.api.end_streams)
    shown_host = f"[{host}]" if ":" in host else host
    if policy is not None:
        out.write(f"goldfive serve: who may decide follows the policy {policy.source or ''} ({len(policy)} rules)\n")
    if notify is not None and notify.targets:  # before the announcement: its last line is the admin's token
        channels = ", ".join(t.channel for t in notify.targets)
        out.write(f"goldfive serve: notifications on {channels} (links to {notify.public_url})\n")
    announce(store, signer, path, created, f"http://{shown_host}:{port}/", out, checkpoints=checkpoints)
    gc.set_threshold(*GC_THRESHOLDS)  # this process is the server's own (see GC_THRESHOLDS)
    server.run()
