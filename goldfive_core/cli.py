"""The ``goldfive`` command: see and answer a running agent's approvals from another terminal.

Works against a store (``--db PATH`` / ``GOLDFIVE_DB``, default ``./goldfive.db``;
``--dsn URL`` / ``GOLDFIVE_DSN`` for PostgreSQL). Decisions go through the
store's control inbox to the live agent, and the command prints the agent's
ack. When the agent's process is gone, ``approve``/``reject`` record the
decision in the store; a restarted run that replays the call picks it up.

Exit codes: 0 done · 1 refused (unknown id or run, already decided, stale digest, FAILURE ack) ·
2 usage error (bad arguments, invalid JSON or UTF-8, a value over a size limit) · 3 store
unreachable, or not a goldfive store · 4 no agent answered in time. A closed output pipe
(``goldfive pending | head``) ends the command quietly with 0; no error prints a traceback.

Output: text for people, in which everything an agent or a model wrote is made inert
(control characters and escape sequences escaped, long fields shortened with a marker);
``--json`` prints exactly one JSON object per command (``events --follow``: one per line).
Lists are paged (``--limit``/``--offset``) and always say how many more there are.
Read commands (pending, show, events, runs, audit) open the store read-only and never
create or upgrade it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import getpass
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NoReturn

from . import cli_answer, cli_grants, cli_mcp, cli_remote, cli_review
from ._text import inert
from .approvals import Principal
from .cli_text import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    _Exit,
    _json_line,
    _Out,
    _parse_edit,
    _say,
    _say_ack,
    _say_audit,
    _say_events,
    _say_pending_page,
    _say_runs,
    _show_text,
    _when,
)
from .control import ControlAck, ControlKind
from .elicitation import form_from_metadata
from .errors import ConfigError
from .events import event_to_dict
from .limits import LimitError, Limits
from .policy import PolicyAuthority, PolicyError, load_policy, load_policy_from_env
from .store import (
    DEFAULT_DB_PATH,
    ApprovalRow,
    DeliveryTimeout,
    ExecutionState,
    RunGone,
    SchemaVersionError,
    Store,
    StoreError,
    StoreUnavailableError,
    open_store,
)
from .store.base import OPEN_STATUSES
from .store.context import approval_context
from .store.decide import (
    DEFAULT_DECIDE_TIMEOUT_S,
    AmbiguousApprovalError,
    ApprovalLookupError,
    DecideVerdict,
    decide,
    find_approval,
)
from .store.sender import AmbiguousRunError, RunNotLiveError, UnknownRunError, send_control
from .store.views import approval_json, approvals_json, cli_approval, execution_fields, in_doubt_json, run_json

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_UNREACHABLE", "EXIT_USAGE", "main"]

# The exit codes and output helpers live in cli_text, shared with the HTTP client mode (cli_remote).

FIELD = 200
"""Longest untrusted field shown in a list line (``show`` allows more; ``--json`` gives it whole)."""

FIELD_FULL = 4000
"""Longest untrusted field ``show`` prints."""


def _t(value: object, limit: int | None = FIELD) -> str:
    """Untrusted text for a terminal line (see :func:`goldfive_core._text.inert`)."""
    return inert(value, limit)


# -- parsing ------------------------------------------------------------------------------------------
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {inert(text, 40)!r}") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds in (0, {MAX_TIMEOUT_S:g}], got {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {inert(text, 40)!r}") from None
    if value < 0 or value > 10_000_000:
        raise argparse.ArgumentTypeError(f"must be between 0 and 10000000, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse echoes bad values: keep them inert too.
        self.print_usage(sys.stderr)
        _say(f"{self.prog}: error: {inert(message, 400)}", err=True)
        raise SystemExit(EXIT_USAGE)


def _parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS, help="SQLite store file (env GOLDFIVE_DB)")
    common.add_argument("--dsn", default=argparse.SUPPRESS, help="PostgreSQL DSN (env GOLDFIVE_DSN)")
    common.add_argument("--schema", default=argparse.SUPPRESS, help="PostgreSQL schema (env GOLDFIVE_PG_SCHEMA)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help="talk to a goldfive serve instead of the database (env GOLDFIVE_URL)"
    )
    common.add_argument("--token", default=argparse.SUPPRESS, help="with --url: your token (env GOLDFIVE_TOKEN)")
    common.add_argument(
        "--timeout", type=_seconds, default=argparse.SUPPRESS, help="seconds to wait for the agent's ack (default 30)"
    )
    parser = _Parser(
        prog="goldfive",
        description="See and answer the approvals of agents running under goldfive.",
        epilog="exit codes: 0 ok, 1 refused, 2 usage, 3 store unreachable, 4 no agent answered in time",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def cmd(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[common])

    p = cmd("pending", "list approvals waiting for a decision, oldest (closest to expiry) first")
    p.add_argument("--run", help="only this run")
    p.add_argument("--limit", type=_count, default=100, help="at most this many (default 100)")
    p.add_argument("--offset", type=_count, default=0, help="skip this many (paging)")
    p = cmd("show", "show one approval in full")
    p.add_argument("id", help="the approval's target id")
    p.add_argument("--run", help="the run, when the id is open in several")
    p = cmd("approve", "approve a pending request")
    p.add_argument("id", help="the approval's target id")
    p.add_argument("--edit", metavar="JSON", help="approve with these arguments instead (a JSON object)")
    p.add_argument("--by", help="who decides (default: $GOLDFIVE_USER or your login)")
    p.add_argument("--reason", default="", help="a note the agent sees")
    p.add_argument("--digest", help="refuse unless the call still has this args digest (from 'show')")
    p.add_argument("--run", help="the run, when the id is open in several")
    p.add_argument("--policy", metavar="FILE", help="who may decide comes from this policy (env GOLDFIVE_POLICY)")
    p.add_argument(
        "--grant",
        metavar="SCOPE",
        help="also allow the rule's later matching calls: run, session or a duration the rule offers (goldfive grants)",
    )
    p = cmd("reject", "reject a pending request")
    p.add_argument("id", help="the approval's target id")
    p.add_argument("--reason", required=True, help="why (the model sees it)")
    p.add_argument("--by", help="who decides (default: $GOLDFIVE_USER or your login)")
    p.add_argument("--digest", help="refuse unless the call still has this args digest")
    p.add_argument("--run", help="the run, when the id is open in several")
    p.add_argument("--policy", metavar="FILE", help="who may decide comes from this policy (env GOLDFIVE_POLICY)")
    cli_answer.add_parser(cmd)
    for name, text in (
        ("pause", "pause a run at its next step"),
        ("resume", "resume a paused run"),
        ("cancel", "cancel a run"),
    ):
        p = cmd(name, text)
        p.add_argument("--run", help="the run (default: the only live one)")
        if name != "resume":
            p.add_argument("--reason", default="", help="why")
    p = cmd("steer", "give a run a new direction (resumes it if paused)")
    p.add_argument("text", help="what the agent should do instead")
    p.add_argument("--run", help="the run (default: the only live one)")
    p = cmd("events", "print the audit log of events")
    p.add_argument("--run", help="only this run")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events (Ctrl-C stops)")
    p.add_argument("--limit", type=_count, default=200, help="at most this many past events (default 200; 0 = all)")
    p = cmd("runs", "list runs and whether their process is alive, newest first")
    p.add_argument("--limit", type=_count, default=50, help="at most this many (default 50)")
    p.add_argument("--offset", type=_count, default=0, help="skip this many (paging)")
    p = cmd("notify", "notification delivery (goldfive serve --notify): what was sent, what waits, what failed")
    p.add_argument("action", choices=["status"], help="status: per channel counts and the latest failures")
    p = cmd("resolve", "settle a tool call reported IN DOUBT (its process died while it ran)")
    p.add_argument("id", help="the call's target id")
    p.add_argument("--run", help="the run that claimed it (when the call id is in doubt in several runs)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--ran", action="store_true", help="it did run: a replay returns without running it")
    how.add_argument("--did-not-run", action="store_true", help="it did not run: a replay may run it (once)")
    p.add_argument("--by", help="who says so (default: $GOLDFIVE_USER or your login)")
    p = cmd("audit", "check the audit log")
    p.add_argument("action", choices=["verify"], help="verify: recompute the hash chain")
    p.add_argument("--checkpoint", metavar="FILE", help="a signed checkpoint kept outside the database")
    p.add_argument(
        "--public-key",
        metavar="KEY",
        help="the key goldfive serve signs checkpoints and decisions with: ed25519:<base64> (as serve prints it) or a "
        "file (PEM or base64); every decision signature is verified with it (alone or with --checkpoint)",
    )
    p.add_argument("--origin", default="goldfive", help="the log name in the checkpoint (default goldfive)")
    p = cmd("serve", "run the HTTP API and web inbox over this store (pip install 'goldfive[server]')")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    p.add_argument(
        "--key",
        help="decision-signing key file, created on first start (env GOLDFIVE_SIGNING_KEY; "
        "default ~/.config/goldfive/decision-key.pem)",
    )
    p.add_argument("--secure-cookies", action="store_true", help="mark the session cookie Secure (behind HTTPS)")
    p.add_argument(
        "--notify",
        help="notification config (TOML: webhook, Slack, email channels; env GOLDFIVE_NOTIFY); see the README",
    )
    p.add_argument(
        "--policy",
        metavar="FILE",
        help="who may decide each rule's requests, checked against the users' names and roles (env GOLDFIVE_POLICY)",
    )
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="where signed audit checkpoints go, outside the database (default: audit-checkpoint.txt beside --key)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="sign the audit chain head this often while it moves (default 60; 0: never)",
    )
    cli_grants.add_parser(cmd)
    cli_mcp.add_parser(cmd)
    cli_review.add_parser(cmd)
    p = cmd("users", "manage who may log in to goldfive serve")
    p.add_argument("action", choices=["add", "list", "disable", "enable", "rotate", "groups"], help="what to do")
    p.add_argument("name", nargs="?", help="the user's name (add, disable, enable, rotate, groups)")
    p.add_argument("--role", choices=["viewer", "approver", "admin", "agent"], help="add: the user's role")
    p.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="G",
        help="add: a policy group the user is in (a rule's role:G names them); repeat for more",
    )
    p.add_argument("--add", action="append", default=[], metavar="G", help="groups: put the user in group G")
    p.add_argument("--remove", action="append", default=[], metavar="G", help="groups: take the user out of G")
    return parser


def _open(args: argparse.Namespace, command: _Command) -> Store:
    dsn = getattr(args, "dsn", None) or None
    db = getattr(args, "db", None) or None
    if dsn and db:
        raise _Exit(EXIT_USAGE, "give --db or --dsn, not both")
    location = dsn or db or os.environ.get("GOLDFIVE_DSN") or os.environ.get("GOLDFIVE_DB") or DEFAULT_DB_PATH
    # The command line never creates or upgrades a store: a typo in --db, or someone else's SQLite
    # file, is an error, not a new set of tables. Read commands also open it read-only. Only
    # `serve` and `users` may come first, before any agent made the store.
    first = command.store == "create"
    store = open_store(
        location,
        create=first,
        schema=getattr(args, "schema", None),
        migrate=first,
        read_only=command.store == "read",
    )
    store.retry_budget_s = 0.0  # a person at a terminal is told at once (exit 3) and can run it again
    return store


def _check_args(args: argparse.Namespace, limits: Limits) -> None:
    """Refuse arguments a store cannot hold (invalid UTF-8) or that exceed the size limits (exit 2)."""
    for name, value in vars(args).items():
        if not isinstance(value, str):
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _Exit(EXIT_USAGE, f"--{name.replace('_', '-')}: not valid UTF-8 ({inert(value, 60)})") from None
    for name in ("id", "run", "by"):
        value = getattr(args, name, None)
        if isinstance(value, str) and len(value) > limits.max_id_chars:
            raise _Exit(
                EXIT_USAGE,
                f"{name} is {len(value)} characters; the limit is {limits.max_id_chars} (GOLDFIVE_LIMIT_MAX_ID_CHARS)",
            )
    for name in ("reason", "text"):
        value = getattr(args, name, None)
        if isinstance(value, str) and len(value) > limits.max_prompt_chars:
            raise _Exit(
                EXIT_USAGE,
                f"--{name} is {len(value)} characters; the limit is {limits.max_prompt_chars} "
                "(GOLDFIVE_LIMIT_MAX_PROMPT_CHARS)",
            )
    if getattr(args, "edit", None) is not None and args.command == "approve":
        # Parsed before any store or server is reached: a bad --edit is a usage error (exit 2) in both modes.
        args.edited = _parse_edit(args.edit, limits)


def _decider(args: argparse.Namespace) -> str:
    return str(args.by or _os_user())


def _os_user() -> str:
    try:
        return os.environ.get("GOLDFIVE_USER") or getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (containers)
        return ""


# -- commands -------------------------------------------------------------------------------------------
def _pending(store: Store, args: argparse.Namespace, out: _Out) -> int:
    page = store.approval_page(statuses=OPEN_STATUSES, run_id=args.run, limit=args.limit, offset=args.offset)
    listed = [cli_approval(item) for item in approvals_json(store, page.rows, context=True)]
    return _say_pending_page(listed, page.total, args.offset, in_doubt_json(store), out)


def _resolve(store: Store, ident: str, run: str | None) -> ApprovalRow:
    try:
        return find_approval(store, ident, run_id=run)
    except AmbiguousApprovalError as exc:
        raise _Exit(EXIT_USAGE, str(exc)) from None
    except ApprovalLookupError as exc:
        raise _Exit(EXIT_FAILURE, str(exc)) from None


def _show(store: Store, args: argparse.Namespace, out: _Out) -> int:
    row = _resolve(store, args.id, args.run)
    run = store.run(row.run_id)
    data = cli_approval(approval_json(row, liveness=store.liveness_of(run)))
    data.update(execution_fields(store, row.target_id, row.run_id))
    data["run"] = run_json(store, run) if run is not None else None
    data["context"] = approval_context(store, row)
    out.emit(_show_text(data), data)
    return EXIT_OK


def _ack_exit(ack: ControlAck, out: _Out) -> int:
    data = {"result": ack.result.value, "detail": ack.detail, "control_id": ack.control_id, "data": ack.data}
    return _say_ack(data, out)


def _timeout(args: argparse.Namespace) -> float:
    timeout = getattr(args, "timeout", None)
    return DEFAULT_DECIDE_TIMEOUT_S if timeout is None else float(timeout)


def _authority(args: argparse.Namespace) -> PolicyAuthority:
    """Who may decide: the deciding side's policy (--policy / GOLDFIVE_POLICY), else the request's own fields."""
    try:
        policy = load_policy(args.policy) if args.policy else load_policy_from_env()
    except PolicyError as exc:
        raise _Exit(EXIT_USAGE, f"bad policy: {exc}") from None
    return PolicyAuthority(policy)


def _answer(store: Store, args: argparse.Namespace, out: _Out) -> int:
    row = _resolve(store, args.id, args.run)
    approve, args.edited, answer = cli_answer.plan(args, row.kind, form_from_metadata(row.metadata))
    return _decide(store, args, out, approve=approve, answer=answer)


def _decide(store: Store, args: argparse.Namespace, out: _Out, *, approve: bool, answer: str = "") -> int:
    edited: dict[str, Any] | None = getattr(args, "edited", None) if approve else None  # parsed by _check_args
    authority = _authority(args)
    try:
        result = decide(
            store,
            args.id,
            approve=approve,
            principal=Principal(name=_decider(args), channel="cli"),
            reason=args.reason or "",
            edited_args=edited,
            args_digest=args.digest,
            run_id=args.run,
            timeout_s=_timeout(args),
            authority=authority,
            grant=getattr(args, "grant", None),
            answer=answer,
        )
    except AmbiguousApprovalError as exc:
        raise _Exit(EXIT_USAGE, str(exc)) from None
    except ApprovalLookupError as exc:
        raise _Exit(EXIT_FAILURE, str(exc)) from None
    if result.ack is not None:
        return _ack_exit(result.ack, out)
    if result.verdict is DecideVerdict.RECORDED:
        out.emit(
            _t(result.detail, FIELD_FULL),
            {"result": "RECORDED", "target_id": result.target_id, "run_id": result.run_id, "detail": result.detail},
        )
        return EXIT_OK
    if result.verdict is DecideVerdict.NO_ANSWER:
        raise _Exit(EXIT_TIMEOUT, result.detail)
    raise _Exit(EXIT_FAILURE, result.detail)


def _run_control(store: Store, args: argparse.Namespace, out: _Out, kind: ControlKind) -> int:
    payload: dict[str, Any] = {"decided_by": _os_user(), "channel": "cli"}
    if kind is ControlKind.STEER:
        payload["text"] = args.text
    elif getattr(args, "reason", ""):
        payload["reason"] = args.reason
    try:
        ack = send_control(store, kind, payload, run=args.run, timeout_s=_timeout(args))
    except AmbiguousRunError as exc:
        raise _Exit(EXIT_USAGE, str(exc)) from None
    except (UnknownRunError, RunNotLiveError) as exc:
        raise _Exit(EXIT_FAILURE, str(exc)) from None
    except RunGone as exc:
        raise _Exit(EXIT_FAILURE, f"not delivered: {exc}") from None
    except DeliveryTimeout as exc:
        raise _Exit(EXIT_TIMEOUT, f"no answer: {exc}") from None
    return _ack_exit(ack, out)


def _event_line(row: Any) -> tuple[str, dict[str, Any]]:
    event = row.event()
    body = event_to_dict(event)
    payload = body.get(row.kind, {})
    text = f"#{row.seq:<5} {_when(row.emitted_at_ms)}  {_t(row.run_id, 60)} [{row.sequence}] {_t(row.kind, 40)} " + _t(
        json.dumps(payload, sort_keys=True, ensure_ascii=False), 160
    )
    return text, {"seq": row.seq, "hash": row.hash, "event": body}


def _events(store: Store, args: argparse.Namespace, out: _Out) -> int:
    # The head is read once, before the rows: reading it again after an empty read would skip whatever an
    # agent appended in between (--follow then missed the run's first events).
    head_seq, _ = store.audit_head()
    total = store.count_audit(run_id=args.run)
    if args.run:  # one run's events are few: read them all, show the tail
        rows = store.audit_rows(run_id=args.run, limit=1_000_000)
        rows = rows[-args.limit :] if args.limit > 0 else rows
    elif args.limit == 0:
        rows = store.audit_rows(limit=10_000_000)
    else:  # seqs grow by one per row (a gap only after a failed write): start near the end
        rows = store.audit_rows(after_seq=max(0, head_seq - args.limit), limit=args.limit)
    last = rows[-1].seq if rows else head_seq
    _say_events([_event_line(r) for r in rows], total, out, follow=args.follow)
    if not args.follow:
        return EXIT_OK
    try:
        while True:
            new = store.audit_rows(after_seq=last, run_id=args.run)
            for row in new:
                out.emit(*_event_line(row))
                last = row.seq
            sys.stdout.flush()
            if not new:
                time.sleep(0.2)
    except KeyboardInterrupt:
        return EXIT_OK


def _runs(store: Store, args: argparse.Namespace, out: _Out) -> int:
    total = store.count_runs(running_only=False)
    runs = store.runs(running_only=False, limit=args.limit, offset=args.offset)
    now = store.clock_ms() if runs else 0
    return _say_runs([run_json(store, run, now=now) for run in runs], total, args.offset, out)


def _notify_status(store: Store, args: argparse.Namespace, out: _Out) -> int:
    from .store.outbox import outbox_rows, outbox_summary
    from .store.sql import SqlStore

    if not isinstance(store, SqlStore):
        raise _Exit(EXIT_USAGE, "notification status needs a SQLite or PostgreSQL store")
    summary = outbox_summary(store)
    failures = [row.failure() for row in outbox_rows(store, status="failed", limit=20)]
    if out.json:
        out.emit("", {"channels": summary, "failures": failures})
        return EXIT_OK
    if not summary:
        _say("no notifications recorded (is goldfive serve running with --notify?)")
        return EXIT_OK
    _say(f"{'channel':<32} {'sent':>6} {'pending':>8} {'failed':>7}")
    for channel, counts in summary.items():
        _say(f"{_t(channel, 32):<32} {counts['sent']:>6} {counts['pending']:>8} {counts['failed']:>7}")
    for f in failures:
        _say(
            f"failed #{f['id']} {f['channel']} {f['kind']} {_t(str(f['target_id']), 60)} "
            f"after {f['attempts']} tries: {_t(f['error'], 160)}"
        )
    return EXIT_OK


def _resolve_doubt(store: Store, args: argparse.Namespace, out: _Out) -> int:
    doubts = [
        ex
        for ex in store.executions(state=ExecutionState.EXECUTING)
        if ex.target_id == args.id and args.run in (None, ex.run_id)
    ]
    if not doubts:  # a call the ledger saw finish (done) is never settled again: a replay returns its result
        found = store.execution(args.id)
        state = "unknown" if found is None else found.state.value
        raise _Exit(EXIT_FAILURE, f"{_t(args.id, 80)!r} is not in doubt (execution: {state}); nothing was changed")
    if len(doubts) > 1:
        runs = ", ".join(sorted(_t(ex.run_id, 80) for ex in doubts))
        raise _Exit(EXIT_USAGE, f"{_t(args.id, 80)!r} is in doubt in several runs ({runs}); name one with --run")
    ex = doubts[0]
    if store.liveness_of(store.run(ex.run_id)).live:
        raise _Exit(EXIT_FAILURE, f"{args.id!r} is running right now in run {ex.run_id}; it is not in doubt")
    if not store.resolve_execution(args.id, ran=bool(args.ran), by=_decider(args), run_id=ex.run_id):
        raise _Exit(EXIT_FAILURE, f"{args.id!r} was settled by someone else just now")
    text = (
        "it ran: a replay returns without running it again"
        if args.ran
        else "it did not run: the recorded approval lets a replay run it once"
    )
    out.emit(f"resolved {_t(args.id, 80)!r}: {text}", {"target_id": args.id, "ran": bool(args.ran)})
    return EXIT_OK


def _audit(store: Store, args: argparse.Namespace, out: _Out) -> int:
    if args.checkpoint and not args.public_key:
        raise _Exit(EXIT_USAGE, "--checkpoint needs --public-key (the key that signed it)")
    if args.public_key:
        try:
            from .store.checkpoint import CheckpointError, load_public_key, trust_key_of, verify_chain
        except ImportError as exc:
            raise _Exit(EXIT_USAGE, str(exc)) from None
        try:
            checkpoint = ""
            if args.checkpoint:
                with open(args.checkpoint, encoding="utf-8") as note:
                    checkpoint = note.read(100_000)
            if args.public_key.startswith("ed25519:"):
                public_key = load_public_key(args.public_key)
            else:
                with open(args.public_key, encoding="utf-8") as key:
                    public_key = load_public_key(key.read(100_000))
        except (OSError, UnicodeDecodeError, CheckpointError) as exc:
            raise _Exit(EXIT_USAGE, f"cannot read the checkpoint or key: {exc}") from None
        if args.checkpoint:
            report = verify_chain(store, checkpoint, public_key=public_key, origin=args.origin)
        else:  # the decision signatures on the records, checked with the key that made them
            report = store.verify_audit(trust_key=trust_key_of(public_key))
    else:
        report = store.verify_audit()
    data = {
        "ok": report.ok,
        "rows": report.rows,
        "head_hash": report.head_hash,
        "problems": list(report.problems),
        "first_bad_seq": report.first_bad_seq,
    }
    return _say_audit(data, out)


def _serve(store: Store, args: argparse.Namespace, out: _Out) -> int:
    if not 0 <= args.port <= 65535:
        raise _Exit(EXIT_USAGE, f"--port must be 0-65535, got {args.port}")
    if not 0 <= args.checkpoint_every <= 86_400:  # also refuses nan
        raise _Exit(EXIT_USAGE, f"--checkpoint-every must be 0-86400 seconds, got {args.checkpoint_every}")
    try:
        from .server import serve
        from .server.notify import load_notify_config
    except ImportError as exc:
        raise _Exit(EXIT_USAGE, str(exc)) from None
    try:
        notify = load_notify_config(args.notify)
        policy = load_policy(args.policy) if args.policy else load_policy_from_env()
        serve(
            store,
            host=args.host,
            port=args.port,
            key_path=args.key,
            secure_cookies=args.secure_cookies,
            notify=notify,
            policy=policy,
            checkpoint_path=args.checkpoint,
            checkpoint_every_s=args.checkpoint_every,
        )
    except ConfigError as exc:
        raise _Exit(EXIT_USAGE, str(exc)) from None
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def _users(store: Store, args: argparse.Namespace, out: _Out) -> int:
    from .store import users

    try:
        if args.action == "list":
            rows = store.users()
            items: list[dict[str, Any]] = [users.user_json(u) for u in rows]
            if out.json:
                out.emit("", {"users": items})
            elif not items:
                _say("no users (goldfive users add NAME --role approver)")
            for item in [] if out.json else items:
                state = "  DISABLED" if item["disabled"] else ""
                groups = f"  groups {','.join(item['groups'])}" if item["groups"] else ""
                _say(f"{item['name']}  {item['role']}{groups}{state}  (since {_when(item['created_at_ms'])})")
            return EXIT_OK
        if not args.name:
            raise _Exit(EXIT_USAGE, f"goldfive users {args.action} needs a NAME")
        if args.action == "add":
            if not args.role:
                raise _Exit(EXIT_USAGE, "goldfive users add needs --role viewer|approver|admin|agent")
            made = users.add_user(store, args.name, args.role, args.group)
        elif args.action == "groups":
            if not args.add and not args.remove:
                raise _Exit(EXIT_USAGE, "goldfive users groups NAME needs --add G and/or --remove G")
            user = users.set_groups(store, args.name, add=args.add, remove=args.remove)
            shown = ", ".join(user.groups) or "none"
            out.emit(f"{user.name!r} is in groups: {shown}", {"name": user.name, "groups": list(user.groups)})
            return EXIT_OK
        elif args.action == "rotate":
            made = users.rotate_user(store, args.name)
        elif args.action == "enable":
            user = users.enable_user(store, args.name)
            out.emit(
                f"enabled {user.name!r}: their current token works again",
                {"name": user.name, "role": user.role, "disabled": False},
            )
            return EXIT_OK
        else:
            user = users.disable_user(store, args.name)
            out.emit(
                f"disabled {user.name!r}: their token no longer works, their web sessions and open event streams "
                "ended (a serve process ends the streams within a second)",
                {"name": user.name, "role": user.role, "disabled": True},
            )
            return EXIT_OK
    except users.UserError as exc:
        raise _Exit(EXIT_FAILURE, str(exc)) from None
    what = "created" if args.action == "add" else "new token for"
    groups = f", groups {','.join(made.user.groups)}" if made.user.groups else ""
    still = f"; still DISABLED: it works after goldfive users enable {made.user.name}" if made.user.disabled else ""
    out.emit(
        f"{what} {made.user.name!r} (role {made.user.role}{groups}{still}); the token below is shown only once:\n"
        f"{made.token}",
        {
            "name": made.user.name,
            "role": made.user.role,
            "groups": list(made.user.groups),
            "disabled": made.user.disabled,
            "token": made.token,
        },
    )
    return EXIT_OK


def _grants(store: Store, args: argparse.Namespace, out: _Out) -> int:
    return cli_grants.grants_command(args, out, store=store, by=_decider(args))


# -- the command table ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True)
class _Command:
    """One command: what it does against the database and, beside it, against a goldfive serve."""

    local: Callable[[Store, argparse.Namespace, _Out], int]
    remote: Callable[[cli_remote.Client, argparse.Namespace, _Out], int] | None
    """None: the command works on the database only."""
    store: Literal["read", "write", "create"] = "write"
    """How it opens the store: read-only; read-write; or it may create and migrate it (and never goes to --url)."""


COMMANDS: Mapping[str, _Command] = {
    "pending": _Command(local=_pending, remote=cli_remote.pending, store="read"),
    "show": _Command(local=_show, remote=cli_remote.show, store="read"),
    "approve": _Command(
        local=functools.partial(_decide, approve=True), remote=functools.partial(cli_remote.decide, approve=True)
    ),
    "reject": _Command(
        local=functools.partial(_decide, approve=False), remote=functools.partial(cli_remote.decide, approve=False)
    ),
    "answer": _Command(local=_answer, remote=cli_remote.answer),
    **{
        kind.value.lower(): _Command(local=functools.partial(_run_control, kind=kind), remote=cli_remote.run_control)
        for kind in (ControlKind.PAUSE, ControlKind.RESUME, ControlKind.CANCEL, ControlKind.STEER)
    },
    "events": _Command(local=_events, remote=cli_remote.events, store="read"),
    "runs": _Command(local=_runs, remote=cli_remote.runs, store="read"),
    "resolve": _Command(local=_resolve_doubt, remote=None),
    "notify": _Command(local=_notify_status, remote=None),
    "audit": _Command(local=_audit, remote=cli_remote.audit, store="read"),
    "serve": _Command(local=_serve, remote=None, store="create"),
    "users": _Command(local=_users, remote=None, store="create"),
    "grants": _Command(local=_grants, remote=cli_remote.grants),
    "mcp": _Command(local=cli_mcp.mcp_command, remote=cli_mcp.mcp_remote, store="create"),
    "review": _Command(local=cli_review.review_command, remote=cli_review.review_remote, store="read"),
}
"""Every command of the parser, by name."""

READ_COMMANDS = frozenset(name for name, command in COMMANDS.items() if command.store == "read")
"""Commands that only read: the store is opened read-only and never created or migrated."""


def _run_local(command: _Command, args: argparse.Namespace, out: _Out) -> int:
    store = _open(args, command)
    try:
        return command.local(store, args, out)
    finally:
        store.close()


def _run_remote(command: _Command, args: argparse.Namespace, out: _Out, url: str) -> int:
    token = getattr(args, "token", None) or os.environ.get("GOLDFIVE_TOKEN", "")
    client = cli_remote.connect(args, url=url, token=token)
    if command.remote is None:
        raise _Exit(EXIT_USAGE, f"goldfive {args.command} works on the database only (leave out --url)")
    return command.remote(client, args, out)


def _fail(code: int, message: str, as_json: bool) -> NoReturn:
    if as_json:
        _say(_json_line({"error": message, "exit_code": code}))
    else:
        _say(f"goldfive: {inert(message, 2000)}", err=True)
    raise SystemExit(code)


def _quiet_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush stays silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``goldfive`` command; returns (and exits with) the exit code."""
    try:
        return _main(argv)
    except BrokenPipeError:  # `goldfive pending | head`: the reader has all it wanted
        _quiet_stdout()
        raise SystemExit(EXIT_OK) from None


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    out = _Out(as_json)
    code = EXIT_OK
    url = getattr(args, "url", None) or os.environ.get("GOLDFIVE_URL", "")
    try:
        limits = Limits.from_env()
        _check_args(args, limits)
        command = COMMANDS[args.command]
        if url and (command.store != "create" or command.remote is not None):  # mcp: an agent of that serve
            code = _run_remote(command, args, out, url)
        else:
            code = _run_local(command, args, out)
    except _Exit as exc:
        _fail(exc.code, exc.message, as_json)
    except SchemaVersionError as exc:
        _fail(EXIT_UNREACHABLE, f"not usable: {exc}", as_json)
    except StoreUnavailableError as exc:
        _fail(EXIT_UNREACHABLE, f"store unreachable: {exc}", as_json)
    except StoreError as exc:
        _fail(EXIT_UNREACHABLE, f"store error: {exc}", as_json)
    except BrokenPipeError:
        raise
    except (ValueError, LimitError) as exc:  # a configuration value (GOLDFIVE_LIMIT_*, ...) is wrong
        _fail(EXIT_USAGE, str(exc), as_json)
    except Exception as exc:  # the last line of defence: a message and exit 1, never a traceback
        _fail(EXIT_FAILURE, f"internal error ({type(exc).__name__}): {exc}", as_json)
    sys.stdout.flush()
    if code:
        raise SystemExit(code)
    return code


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy, so the remote client shares its exception classes.
    from goldfive_core.cli import main as _entry

    _entry()
