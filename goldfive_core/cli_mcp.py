"""``goldfive mcp``: the MCP approval gateway on stdio (or streamable HTTP, ``--http``), wired to a store (docs/mcp.md).

The gateway (:mod:`goldfive_core.adapters.mcp_gateway`) is an adapter; this module only reads the command line
and a TOML config and hands the gateway a control channel: a :class:`~goldfive_core.store.StoreChannel` on the
store the command table opened (``--db`` / ``--dsn``, created if missing, as an agent's is), or with ``--url``
an :class:`~goldfive_core.store.http.HttpChannel` to that ``goldfive serve`` with an agent's token (``--token`` /
GOLDFIVE_TOKEN), as every agent over HTTP has. Either way its requests appear in ``goldfive pending``, the inbox
and notifications. Nothing but MCP is written to stdout; messages go to stderr. The ``--http`` options and the
bearer token are :mod:`goldfive_core.cli_mcp_http`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import tomllib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._util import env_seconds
from .cli_mcp_http import add_http_arguments, http_listen, say_listening
from .cli_text import EXIT_USAGE, _Exit
from .errors import ConfigError
from .policy import Allow, Ask, Deny, Policy, PolicyError, Rule, load_policy, load_policy_from_env
from .store.sql import DEFAULT_RETRY_BUDGET_S

if TYPE_CHECKING:
    from .adapters.mcp_gateway import Upstream
    from .store import Store

__all__ = ["add_parser", "mcp_command", "mcp_remote", "quick_policy"]

MAX_CONFIG_BYTES = 1_000_000


def add_parser(cmd: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Register ``goldfive mcp`` on the command table."""
    p = cmd("mcp", "run an MCP server (stdio, or streamable HTTP with --http) in front of upstream MCP servers' tools")
    p.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="NAME=CMD|URL",
        help="an upstream MCP server: a stdio command (bank='python bank.py') or a streamable-HTTP URL (repeat)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="a TOML file of [upstream.NAME] tables (command/args/env or url; timeout)"
    )
    p.add_argument("--policy", metavar="FILE", help="rules on tool calls (the same TOML; env GOLDFIVE_POLICY)")
    for flag, what in (("--gate", "ask a person"), ("--allow", "allow"), ("--deny", "deny")):
        p.add_argument(
            flag,
            action="append",
            default=[],
            metavar="PATTERN",
            help=f"a quick rule: {what} for tools matching PATTERN (fnmatch; checked before --policy's rules)",
        )
    p.add_argument(
        "--default",
        choices=["ask", "allow"],
        default="ask",
        help="calls no rule names: ask a person (default: fail closed) or allow",
    )
    p.add_argument(
        "--approval-timeout",
        type=float,
        metavar="SECONDS",
        help="how long a call waits for a person (default: GOLDFIVE_STEER_TOOL_APPROVAL_TIMEOUT_MS or 10 min)",
    )
    p.add_argument(
        "--progress-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a waiting call sends MCP progress this often, when the client asked for progress (default 10; 0: never)",
    )
    p.add_argument(
        "--restarts",
        type=int,
        default=None,
        metavar="N",
        help="start an upstream that died again, at most N times (default 3; 0: report its tools unavailable)",
    )
    p.add_argument(
        "--upstream-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long an upstream has to answer a call it was sent (default 300; an upstream's own 'timeout' in "
        "--config overrides it); no answer in time: the caller is told the call may have run, and it is not re-sent",
    )
    p.add_argument(
        "--elicit",
        choices=["person", "client", "client-or-decline"],
        default="person",
        help="who answers an upstream's elicitation: a person through goldfive (default), the calling MCP client "
        "when it declared elicitation (else a person), or that client (else decline)",
    )
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a run label rules may match")
    add_http_arguments(p)


def quick_policy(args: argparse.Namespace) -> Policy | None:
    """The quick rules (``--gate/--allow/--deny``) before the ``--policy`` file's (or GOLDFIVE_POLICY's) rules."""
    quick: list[Rule] = []
    for flag, patterns in (("gate", args.gate), ("allow", args.allow), ("deny", args.deny)):
        for pattern in patterns:
            action: Allow | Ask | Deny
            if flag == "gate":
                action = Ask()
            elif flag == "allow":
                action = Allow()
            else:
                action = Deny(reason=f"tools matching {pattern!r} are denied by the gateway's --deny")
            quick.append(Rule(name=f"--{flag} {pattern}", tool=pattern, action=action))
    base = load_policy(args.policy) if args.policy else load_policy_from_env()
    if not quick:
        return base
    rules = [*quick, *(base.rules if base is not None else ())]
    return Policy(rules, source=base.source if base is not None else "the command line")


def upstreams_of(args: argparse.Namespace) -> list[Upstream]:
    """``--upstream NAME=CMD`` entries, then the ``--config`` file's ``[upstream.NAME]`` tables."""
    from .adapters.mcp_gateway import Upstream

    found = [Upstream.parse(spec) for spec in args.upstream]
    if args.config:
        found.extend(_config_upstreams(args.config))
    if not found:
        raise ConfigError("goldfive mcp needs an upstream: --upstream NAME=CMD or --config FILE")
    return found


def _config_upstreams(path: str) -> list[Upstream]:
    from .adapters.mcp_gateway import Upstream

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the gateway config {path!r}: {exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the gateway config {path!r} is over {MAX_CONFIG_BYTES} bytes")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"the gateway config {path!r} is not TOML: {exc}") from None
    tables = data.get("upstream", {})
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"the gateway config {path!r} has no [upstream.NAME] tables")
    out = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: upstream.{name} must be a table")
        keys = {"command", "args", "env", "cwd", "url", "headers_from_env", "protocol", "timeout"}
        unknown = set(table) - keys
        if unknown:
            raise ConfigError(f"{path}: upstream.{name} has unknown keys {sorted(unknown)} ({', '.join(sorted(keys))})")
        command, args, env, cwd = table.get("command", ""), table.get("args", []), table.get("env"), table.get("cwd")
        url, headers, protocol = table.get("url", ""), table.get("headers_from_env", {}), table.get("protocol", "")
        if not isinstance(command, str) or not _strings(args) or (env is not None and not _string_map(env)):
            raise ConfigError(f"{path}: upstream.{name} needs command (string), args (strings), env (strings)")
        if not isinstance(url, str) or not _string_map(headers) or (cwd is not None and not isinstance(cwd, str)):
            raise ConfigError(f"{path}: upstream.{name}: url and cwd are strings, headers_from_env maps strings")
        if not isinstance(protocol, str):
            raise ConfigError(f"{path}: upstream.{name}: protocol is a string (a protocol revision)")
        timeout = table.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
            raise ConfigError(f"{path}: upstream.{name}: timeout is a number of seconds")
        where = {"cwd": cwd, "url": url, "headers_from_env": headers, "protocol": protocol}
        out.append(
            Upstream(
                name=name,
                command=command,
                args=tuple(args),
                env=env,
                timeout_s=float(timeout) if timeout is not None else None,
                **where,
            )
        )
    return out


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _labels(pairs: Sequence[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"--label takes KEY=VALUE, got {pair!r}")
        labels[key] = value
    return labels


def _seconds_ms(value: float | None, flag: str) -> int | None:
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0 or value > 7 * 24 * 3600:
        raise ConfigError(f"{flag} must be a number of seconds in (0, 604800], got {value}")
    return round(value * 1000)


def mcp_command(store: Store, args: argparse.Namespace, out: object = None) -> int:
    """Run the gateway on ``store`` until its client disconnects; 0 when it ended normally."""
    from .store import StoreChannel

    # An agent process rides out a short store outage as every agent does (the command line opened it with none).
    store.retry_budget_s = env_seconds("GOLDFIVE_STORE_RETRY_S", DEFAULT_RETRY_BUDGET_S, zero_ok=True)
    return _run(args, lambda: StoreChannel(store))


def mcp_remote(client: Any, args: argparse.Namespace, out: object = None) -> int:
    """``--url``: run the gateway against a ``goldfive serve``, as the agent whose token ``--token`` gives."""
    try:
        from .store.http import HttpChannel
    except ImportError as exc:  # the http extra is missing: say how to install it (exit 2)
        raise _Exit(EXIT_USAGE, str(exc)) from None
    # GOLDFIVE_TRUST_KEY, when set, is the channel's: only decisions that server signed are applied.
    return _run(args, lambda: HttpChannel(client.base, token=client.token))


def _run(args: argparse.Namespace, make_channel: Callable[[], Any]) -> int:
    try:
        from .adapters.mcp_gateway import DEFAULT_RESTARTS, DEFAULT_UPSTREAM_TIMEOUT_S, MCPGateway
        from .adapters.mcp_gateway.upstreams import check_timeout
    except ImportError as exc:  # the extra is missing: say how to install it (exit 2)
        raise _Exit(EXIT_USAGE, str(exc)) from None
    if not math.isfinite(args.progress_every) or args.progress_every < 0:
        raise ConfigError(f"--progress-every must be >= 0 seconds, got {args.progress_every}")
    try:
        policy = quick_policy(args)
    except (PolicyError, ValueError) as exc:
        raise ConfigError(str(exc)) from None
    upstreams = upstreams_of(args)
    timeout_ms = _seconds_ms(args.approval_timeout, "--approval-timeout")
    upstream_timeout_s = check_timeout(
        DEFAULT_UPSTREAM_TIMEOUT_S if args.upstream_timeout is None else args.upstream_timeout, "--upstream-timeout"
    )
    logging.basicConfig(level=os.environ.get("GOLDFIVE_LOG_LEVEL", "WARNING").upper())  # stderr: stdout is MCP's

    listen = http_listen(args)

    async def run() -> None:
        channel = make_channel()  # on the loop: a channel binds to the loop that serves it
        try:
            gateway = MCPGateway(
                upstreams,
                default=args.default,
                approval_timeout_ms=timeout_ms,
                progress_every_s=args.progress_every,
                restarts=DEFAULT_RESTARTS if args.restarts is None else args.restarts,
                elicit=args.elicit,
                upstream_timeout_s=upstream_timeout_s,
                control=channel,
                sinks=[channel.sink],
                policy=policy,
                labels=_labels(args.label),
            )
            if listen is None:
                await gateway.serve_stdio()
            else:
                where, http = listen[1], listen[0]
                await gateway.serve_http(http, on_ready=lambda url: say_listening(url, where))
        finally:
            await channel.aclose()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0
