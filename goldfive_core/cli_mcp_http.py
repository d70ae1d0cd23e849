"""``goldfive mcp --http HOST:PORT``: the options for listening on streamable HTTP, and the bearer token.

The token is the operator's: from an environment variable (``--http-token-env VAR``), or else a token file
(``--http-token-file``, default ``~/.goldfive/mcp-http.token``): read when it exists (so a client's config keeps
working across restarts), made with 32 random bytes when it does not, readable by its owner only (0600; a
file others may read is refused). Only the file's path is printed, never the token.
"""

from __future__ import annotations

import argparse
import os
import secrets
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from .adapters.mcp_gateway import HttpListen

__all__ = ["DEFAULT_TOKEN_FILE", "add_http_arguments", "http_listen", "http_token", "say_listening"]

DEFAULT_TOKEN_FILE = "~/.goldfive/mcp-http.token"
_MAX_TOKEN_FILE_BYTES = 4096


def add_http_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="listen on streamable HTTP at http://HOST:PORT/mcp instead of stdio (a bearer token is required)",
    )
    p.add_argument("--http-token-env", metavar="VAR", help="--http: the bearer token is in this environment variable")
    p.add_argument(
        "--http-token-file",
        metavar="PATH",
        help=f"--http: the bearer token's file, made (0600) if missing (default {DEFAULT_TOKEN_FILE})",
    )
    p.add_argument(
        "--http-public",
        action="store_true",
        help="--http: allow a non-loopback HOST (plain HTTP: only behind TLS, e.g. a reverse proxy)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="--http: a browser Origin allowed to call the gateway (repeat; default: none)",
    )
    p.add_argument("--max-sessions", type=int, default=None, metavar="N", help="--http: sessions at once (100)")


def http_listen(args: argparse.Namespace) -> tuple[HttpListen, str] | None:
    """Where ``--http`` listens, with its token, and where the token is in words (None: serve stdio)."""
    if not args.http:
        if args.http_token_env or args.http_token_file or args.http_public or args.allow_origin or args.max_sessions:
            raise ConfigError("--http-token-env, --http-token-file, --http-public, --allow-origin need --http")
        return None
    from .adapters.mcp_gateway import HttpListen
    from .adapters.mcp_gateway.http import DEFAULT_MAX_SESSIONS

    host, sep, port = args.http.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--http takes HOST:PORT (127.0.0.1:8765), got {args.http!r}")
    token, where = http_token(args)
    listen = HttpListen(
        host=host.strip("[]"),
        port=int(port),
        token=token,
        allowed_origins=tuple(args.allow_origin),
        public=args.http_public,
        max_sessions=args.max_sessions or DEFAULT_MAX_SESSIONS,
    )
    return listen, where


def http_token(args: argparse.Namespace) -> tuple[str, str]:
    """The bearer token and where it came from (in words, for the operator: never the token itself)."""
    if args.http_token_env:
        if args.http_token_file:
            raise ConfigError("--http-token-env and --http-token-file are two sources of one token: pick one")
        token = os.environ.get(args.http_token_env, "").strip()
        if not token:
            raise ConfigError(f"--http-token-env {args.http_token_env}: that environment variable is not set")
        return token, f"the bearer token is ${args.http_token_env}"
    path = Path(os.path.expanduser(args.http_token_file or DEFAULT_TOKEN_FILE))
    made = not path.exists()
    token = _make_token_file(path) if made else _read_token_file(path)
    return token, f"the bearer token is in {path}" + (" (new)" if made else "")


def _make_token_file(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot make the token file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token


def _read_token_file(path: Path) -> str:
    try:
        info = path.stat()
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise ConfigError(f"the token file {path} may be read by others: chmod 600 it (or delete it for a new one)")
        with path.open("rb") as f:
            raw = f.read(_MAX_TOKEN_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_TOKEN_FILE_BYTES:
        raise ConfigError(f"the token file {path} is over {_MAX_TOKEN_FILE_BYTES} bytes")
    return raw.decode("utf-8", errors="replace").strip()


def say_listening(url: str, where: str) -> None:
    """One line on stderr: where the gateway listens and where its token is (stdout stays quiet)."""
    sys.stderr.write(f"goldfive mcp: listening on {url}; {where} (send 'Authorization: Bearer <token>')\n")
    sys.stderr.flush()
