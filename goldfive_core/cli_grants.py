"""``goldfive grants [list|revoke ID]``: standing grants, against the database or a ``goldfive serve`` (``--url``).

A grant is made by an approval with ``--grant run|session|<duration>`` (when the request's rule offers
it) and lets the rule's later matching calls through until it expires or is revoked. ``list`` shows the
active ones (``--all``: revoked and expired too); ``revoke ID`` ends one at once, also for a run that is
running now (its next matching call asks a person again).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._text import inert
from .cli_text import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, _Exit, _Out, _say, _when

__all__ = ["add_parser", "grant_lines", "grants_command"]


def add_parser(cmd: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The ``grants`` subcommand's arguments."""
    p = cmd("grants", "standing grants made by approvals (list; revoke ID ends one at once)")
    p.add_argument("action", nargs="?", choices=["list", "revoke"], default="list", help="list (default) or revoke")
    p.add_argument("id", nargs="?", help="revoke: the grant's id (from 'goldfive grants')")
    p.add_argument("--all", action="store_true", help="list: revoked and expired grants too")
    p.add_argument("--reason", default="", help="revoke: why (kept on the audit log)")
    p.add_argument("--by", help="revoke: who revokes (default: $GOLDFIVE_USER or your login; not with --url)")
    p.add_argument("--limit", type=int, default=100, help="list: at most this many (default 100)")


def _t(value: object, limit: int | None = 200) -> str:
    return inert(value, limit)


def grant_lines(grant: Mapping[str, Any]) -> list[str]:
    """A grant (the JSON shape of ``GrantRow.as_dict``) for a terminal; every field written by others is inert."""
    state = str(grant.get("state", ""))
    scope = str(grant.get("scope", ""))
    where = {"run": f"run {_t(grant.get('run_id'), 80)}", "session": f"session {_t(grant.get('session_id'), 80)}"}
    expires = int(grant.get("expires_at_ms") or 0)
    head = (
        f"{_t(grant.get('grant_id'), 80)}  {state.upper() if state != 'active' else state}  "
        f"rule {_t(grant.get('rule'), 80)!r}  tool {_t(grant.get('tool'), 80)}  "
        f"{where.get(scope, 'any run')}  by {_t(grant.get('granted_by'), 80)}  "
        f"since {_when(int(grant.get('created_at_ms') or 0))}  "
        f"{'expires ' + _when(expires) if expires else 'no expiry of its own'}"
    )
    lines = [head, f"    {_t(grant.get('description'), 400)}"]
    if grant.get("args_constraint"):
        lines.append(f"    only where {_t(grant.get('args_constraint'), 400)}")
    if state == "revoked":
        why = f": {_t(grant.get('revoke_reason'), 200)}" if grant.get("revoke_reason") else ""
        lines.append(
            f"    revoked by {_t(grant.get('revoked_by'), 80)} {_when(int(grant.get('revoked_at_ms') or 0))}{why}"
        )
    return lines


def _list(items: Sequence[Mapping[str, Any]], out: _Out, *, everything: bool) -> int:
    if out.json:
        out.emit("", {"grants": list(items), "total": len(items)})
        return EXIT_OK
    if not items:
        _say("no grants" if everything else "no active grants (--all shows revoked and expired ones)")
    for item in items:
        for line in grant_lines(item):
            _say(line)
    return EXIT_OK


def _revoked(row: Mapping[str, Any], out: _Out) -> int:
    out.emit(
        f"revoked {_t(row.get('grant_id'), 80)}: it lets no more calls through; a running agent asks a person again "
        "from its next matching call",
        {"result": "REVOKED", "grant": dict(row)},
    )
    return EXIT_OK


def grants_command(args: argparse.Namespace, out: _Out, *, store: Any = None, client: Any = None, by: str = "") -> int:
    """Run ``goldfive grants`` against ``store`` (a Store) or ``client`` (the HTTP client of cli_remote)."""
    if args.action == "list" and args.id:
        raise _Exit(EXIT_USAGE, "goldfive grants list takes no id (did you mean: goldfive grants revoke ID?)")
    if args.action == "revoke" and not args.id:
        raise _Exit(EXIT_USAGE, "goldfive grants revoke needs the grant's id (goldfive grants lists them)")
    if not 1 <= args.limit <= 10_000:
        raise _Exit(EXIT_USAGE, f"--limit must be between 1 and 10000, got {args.limit}")
    if client is not None:
        if args.by:
            raise _Exit(EXIT_USAGE, "--by is not used with --url: the server records the token's user")
        if args.action == "list":
            data = client.call("GET", f"/api/grants?limit={args.limit}{'&all=1' if args.all else ''}")
            return _list(data["grants"], out, everything=args.all)
        from urllib.parse import quote

        body = {"reason": args.reason} if args.reason else {}
        data = client.call("POST", f"/api/grants/{quote(args.id, safe='')}/revoke", body)
        return _revoked(data["grant"], out)
    from .store.grants import GrantNotFound, grant_rows, revoke_grant

    if args.action == "list":
        now = store.clock_ms()
        rows = grant_rows(store, active_only=not args.all, at_ms=now, limit=args.limit)
        return _list([r.as_dict(now) for r in rows], out, everything=args.all)
    try:
        row = revoke_grant(store, args.id, by=by, reason=args.reason, channel="cli")
    except GrantNotFound as exc:
        raise _Exit(EXIT_FAILURE, str(exc)) from None
    return _revoked(row.as_dict(store.clock_ms()), out)
