"""The ``goldfive`` command as a client of ``goldfive serve`` (``--url``/``--token``, env GOLDFIVE_URL/GOLDFIVE_TOKEN).

Same commands, same output and exit codes as against the database; decisions are made (and
signed) by the server as the token's user, so ``--by`` is not accepted here. Standard library
only (``urllib``), so the command needs no extra to talk to a server.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import cli_answer
from ._text import inert
from ._util import shorten
from .cli_text import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    _Exit,
    _Out,
    _say_ack,
    _say_audit,
    _say_events,
    _say_pending_page,
    _say_runs,
    _show_text,
    _when,
)
from .store.views import cli_approval

if TYPE_CHECKING:
    import urllib.request

__all__ = [
    "Client",
    "answer",
    "audit",
    "connect",
    "decide",
    "events",
    "grants",
    "pending",
    "run_control",
    "runs",
    "show",
]

_FIELD = 200  # the database mode's limit on untrusted text per line


def _t(value: object, limit: int | None = _FIELD) -> str:
    return inert(value, limit)


class Client:
    """The HTTP API of one goldfive serve, as the token's user (standard library only)."""

    def __init__(self, url: str, token: str, timeout_s: float) -> None:
        if not url.startswith(("http://", "https://")):
            raise _Exit(EXIT_USAGE, f"--url must start with http:// or https://, got {shorten(url, 60)!r}")
        self.base = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout_s: float) -> urllib.request.Request:
        import urllib.request  # here, not at import: a command against the database never loads the HTTP client

        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        return req

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, *, ok: tuple[int, ...] = ()) -> Any:
        """JSON of a 2xx answer (or of a status in ``ok``); a refusal raises _Exit with the server's words."""
        import urllib.error
        import urllib.request

        req = self._request(method, path, body, self.timeout_s)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s + 5) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                data = json.loads(exc.read() or b"{}")
            except ValueError:
                data = {}
            if exc.code in ok:
                return data
            message = str(data.get("error") or data.get("detail") or exc.reason)
            code = EXIT_TIMEOUT if exc.code == 504 else EXIT_UNREACHABLE if exc.code >= 500 else EXIT_FAILURE
            if exc.code == 504:
                message = f"no answer: {message}"
            raise _Exit(code, message, data) from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _Exit(EXIT_UNREACHABLE, f"server {self.base} unreachable: {reason}") from None

    def stream(self, path: str, last_id: int) -> Iterator[dict[str, Any]]:
        """Server-sent events (data as JSON) from ``path``, resuming after ``last_id``."""
        import urllib.error
        import urllib.request

        req = self._request("GET", path, None, 0)
        req.add_header("Accept", "text/event-stream")
        req.add_header("Last-Event-ID", str(last_id))
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                for raw in resp:
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    if line.startswith("data: "):
                        yield json.loads(line[6:])
        except urllib.error.HTTPError as exc:
            raise _Exit(EXIT_FAILURE, f"the server refused the event stream ({exc.code})") from None
        except (urllib.error.URLError, OSError) as exc:
            raise _Exit(EXIT_UNREACHABLE, f"server {self.base} unreachable: {exc}") from None


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _run_q(args: argparse.Namespace) -> str:
    run = getattr(args, "run", None)
    return f"?run={_q(run)}" if run else ""


_PAGE = 500  # the server's largest page


def _paged(client: Client, path: str, key: str, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Up to ``limit`` items of a paged list from ``offset`` (several requests when over a page), and the total."""
    items: list[dict[str, Any]] = []
    sep = "&" if "?" in path else "?"
    while True:
        want = min(limit - len(items), _PAGE)
        page = client.call("GET", f"{path}{sep}limit={max(want, 1)}&offset={offset + len(items)}")
        total = int(page["total"])
        items += page[key][: max(want, 0)]
        if len(items) >= limit or not page[key] or offset + len(items) >= total:
            return items, total


def pending(client: Client, args: argparse.Namespace, out: _Out) -> int:
    run = f"&run={_q(args.run)}" if args.run else ""
    found, total = _paged(client, f"/api/approvals?status=open{run}", "approvals", args.limit, args.offset)
    doubts = client.call("GET", "/api/in-doubt")["in_doubt"]
    return _say_pending_page([cli_approval(item) for item in found], total, args.offset, doubts, out)


def show(client: Client, args: argparse.Namespace, out: _Out) -> int:
    item = client.call("GET", f"/api/approvals/{_q(args.id)}{_run_q(args)}")
    item.pop("events", None)
    shown = cli_approval(item)
    out.emit(_show_text(shown), shown)
    return EXIT_OK


def decide(client: Client, args: argparse.Namespace, out: _Out, *, approve: bool) -> int:
    if getattr(args, "by", None):
        raise _Exit(EXIT_USAGE, "--by is not used with --url: the server records the token's user as the decider")
    body: dict[str, Any] = {}
    if args.reason:
        body["reason"] = args.reason
    if args.digest:
        body["args_digest"] = args.digest
    if approve and getattr(args, "grant", None):
        body["grant"] = args.grant
    if approve and args.edit is not None:
        body["edited_args"] = args.edited  # parsed (and checked) before anything was sent
    verb = "approve" if approve else "reject"
    data = client.call("POST", f"/api/approvals/{_q(args.id)}/{verb}{_run_q(args)}", body, ok=(409,))
    if data.get("verdict") == "recorded":
        out.emit(
            data["detail"],
            {"result": "RECORDED", "target_id": data["target_id"], "run_id": data["run_id"], "detail": data["detail"]},
        )
        return EXIT_OK
    return _ack(data, out)


def answer(client: Client, args: argparse.Namespace, out: _Out) -> int:
    """``goldfive answer`` against a serve: the form comes from the request, the answer is checked before it goes."""
    if getattr(args, "by", None):
        raise _Exit(EXIT_USAGE, "--by is not used with --url: the server records the token's user as the decider")
    item = client.call("GET", f"/api/approvals/{_q(args.id)}{_run_q(args)}")
    form = item.get("form") if isinstance(item.get("form"), dict) else None
    approve, content, dismissed = cli_answer.plan(args, str(item.get("kind") or ""), form)
    body: dict[str, Any] = {"request_id": str(item.get("request_id") or "")}  # the request shown: no other
    if args.reason:
        body["reason"] = args.reason
    if args.digest:
        body["args_digest"] = args.digest
    if approve:
        body["edited_args"] = content
    else:
        body["answer"] = dismissed or "decline"
    verb = "approve" if approve else "reject"
    return _ack(client.call("POST", f"/api/approvals/{_q(args.id)}/{verb}{_run_q(args)}", body, ok=(409,)), out)


def _ack(data: dict[str, Any], out: _Out) -> int:
    return _say_ack({k: data.get(k) for k in ("result", "detail", "control_id", "data")}, out)


def _live_run(client: Client, run: str | None) -> str:
    if run:
        return run
    live = [r["run_id"] for r in client.call("GET", "/api/runs?live=1&limit=500")["runs"]]
    if not live:
        raise _Exit(EXIT_FAILURE, "no live run in this store (is the agent running with a StoreChannel?)")
    if len(live) > 1:
        raise _Exit(EXIT_USAGE, f"several runs are live ({', '.join(live)}); name one with --run")
    return str(live[0])


def run_control(client: Client, args: argparse.Namespace, out: _Out) -> int:
    run_id = _live_run(client, args.run)
    body: dict[str, Any] = {}
    if args.command == "steer":
        body["text"] = args.text
    elif getattr(args, "reason", ""):
        body["reason"] = args.reason
    return _ack(client.call("POST", f"/api/runs/{_q(run_id)}/{args.command}", body, ok=(409,)), out)


def _event_line(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    event = item["event"]
    kind = next((k for k in event if k not in _ENVELOPE), "")
    when = _when(_ms(event.get("emitted_at", "")))
    where = f"{_t(event.get('run_id', ''), 60)} [{event.get('sequence', 0)}]"
    payload = json.dumps(event.get(kind, {}), sort_keys=True, ensure_ascii=False)
    text = f"#{item['seq']:<5} {when}  {where} {_t(kind, 40)} " + _t(payload, 160)
    return text, {"seq": item["seq"], "hash": item["hash"], "event": event}


_ENVELOPE = {"event_id", "run_id", "sequence", "emitted_at", "session_id"}


def _ms(stamp: str) -> int:
    """Milliseconds of a protobuf-JSON timestamp ("2026-01-02T03:04:05.678Z"); 0 when absent or odd."""
    try:
        return int(datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def events(client: Client, args: argparse.Namespace, out: _Out) -> int:
    run = f"&run={_q(args.run)}" if args.run else ""
    if args.limit == 0:  # all of them, a page at a time
        items: list[dict[str, Any]] = []
        after = 0
        while True:
            page = client.call("GET", f"/api/audit/events?after={after}&limit=5000{run}")
            items += page["events"]
            if len(page["events"]) < 5000:
                break
            after = page["events"][-1]["seq"]
    else:
        page = client.call("GET", f"/api/audit/events?limit={min(args.limit, 5000)}{run}")
        items = page["events"]
    total = int(page.get("total", len(items)))
    _say_events([_event_line(i) for i in items], total, out, follow=args.follow)
    if not args.follow:
        return EXIT_OK
    last = items[-1]["seq"] if items else int(page["head_seq"])
    path = "/api/events" + (f"?run={_q(args.run)}" if args.run else "")
    try:
        while True:  # reconnect after a dropped stream, from the last event seen
            for item in client.stream(path, last):
                out.emit(*_event_line(item))
                last = item["seq"]
                sys.stdout.flush()
    except KeyboardInterrupt:
        return EXIT_OK


def runs(client: Client, args: argparse.Namespace, out: _Out) -> int:
    found, total = _paged(client, "/api/runs", "runs", args.limit, args.offset)
    return _say_runs(found, total, args.offset, out)


def audit(client: Client, args: argparse.Namespace, out: _Out) -> int:
    if getattr(args, "checkpoint", None) or getattr(args, "public_key", None):
        # The server's answer is what its database says; a check against a key kept elsewhere is done locally.
        raise _Exit(EXIT_USAGE, "--checkpoint and --public-key check the database itself: use --db or --dsn, not --url")
    return _say_audit(client.call("GET", "/api/audit/verify"), out)


def grants(client: Client, args: argparse.Namespace, out: _Out) -> int:
    from .cli_grants import grants_command

    return grants_command(args, out, client=client)


def connect(args: argparse.Namespace, *, url: str, token: str) -> Client:
    """The client for one command against a goldfive serve at ``url`` (a usage error without a token)."""
    if not token:
        raise _Exit(EXIT_USAGE, "--url needs a token: --token TOKEN or GOLDFIVE_TOKEN (goldfive users add NAME)")
    timeout = getattr(args, "timeout", None)
    return Client(url, token, 30.0 if timeout is None else float(timeout))
