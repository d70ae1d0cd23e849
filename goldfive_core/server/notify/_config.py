"""Where notifications go: the inbox's public URL and the channels (webhook, Slack, email), from TOML and env.

::

    public_url = "https://goldfive.internal"      # or env GOLDFIVE_PUBLIC_URL

    [[webhook]]
    name = "ops"
    url = "https://hooks.internal/goldfive"
    secret_env = "GOLDFIVE_WEBHOOK_SECRET"         # the HMAC secret, read from the environment

    [[slack]]
    name = "finance"
    webhook_url_env = "SLACK_WEBHOOK_URL"          # an incoming webhook, or:
    # bot_token_env = "SLACK_BOT_TOKEN"; channel = "C0123"   (messages are then updated when decided)
    tools = ["transfer_*"]                         # optional filters: tool globs, policy rule names,
    rules = ["large transfers"]                    #   roles the rule lets answer (approvers = ["role:finance"])
    roles = ["finance"]

    [[email]]
    name = "approvers"
    smtp_host = "smtp.internal"
    smtp_port = 587
    starttls = true
    username_env = "SMTP_USER"
    password_env = "SMTP_PASSWORD"
    sender = "goldfive@internal"
    to = ["ana@internal", "bo@internal"]

    [retry]
    max_attempts = 8      # then the notice is marked failed (``goldfive notify status``)
    base_s = 2.0          # first retry after ~2 s, doubling, capped at max_s, with jitter
    max_s = 300.0

Secrets (webhook secrets, Slack URLs and tokens, SMTP passwords) may be written
inline, but ``*_env`` names keep them out of the file. They are never logged:
log lines name the channel, never its URL.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import ConfigError

__all__ = [
    "EmailTarget",
    "NotifyConfig",
    "RetryPolicy",
    "SlackTarget",
    "WebhookTarget",
    "load_notify_config",
]


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Filter:
    """Which notices a channel takes: tool-name globs, policy rule names, approver roles (empty = all)."""

    tools: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    def wants(self, *, tool: str, rule: str, approvers: str = "") -> bool:
        """True when a request for ``tool`` (matched by ``rule``, answerable by ``approvers``) belongs here.

        ``approvers`` is the policy's comma-separated list (``role:finance,ana``); a channel with ``roles``
        takes the requests that one of those roles may answer.
        """
        if self.tools and not any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.tools):
            return False
        if self.rules and rule not in self.rules:
            return False
        allowed = {a.strip() for a in approvers.split(",") if a.strip()}
        return not self.roles or any(f"role:{role}" in allowed for role in self.roles)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WebhookTarget(_Filter):
    """A generic webhook: JSON body, HMAC-SHA256 signature headers, an idempotency key."""

    name: str
    url: str = dataclasses.field(repr=False)
    secret: str = dataclasses.field(repr=False)
    timeout_s: float = 10.0

    @property
    def channel(self) -> str:
        """The channel's key in the outbox."""
        return f"webhook:{self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SlackTarget(_Filter):
    """Slack, by incoming webhook (a new message per notice) or bot token (the request's message is updated)."""

    name: str
    webhook_url: str = dataclasses.field(default="", repr=False)
    bot_token: str = dataclasses.field(default="", repr=False)
    channel_id: str = ""
    api_url: str = "https://slack.com/api"
    timeout_s: float = 10.0

    @property
    def channel(self) -> str:
        """The channel's key in the outbox."""
        return f"slack:{self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmailTarget(_Filter):
    """Mail over SMTP (STARTTLS or implicit TLS when asked; login when a username is set)."""

    name: str
    smtp_host: str
    smtp_port: int = 587
    starttls: bool = True
    ssl: bool = False
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)
    sender: str
    to: tuple[str, ...]
    timeout_s: float = 20.0

    @property
    def channel(self) -> str:
        """The channel's key in the outbox."""
        return f"email:{self.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How often and how long a failing notice is retried before it is marked failed."""

    max_attempts: int = 8
    base_s: float = 2.0
    max_s: float = 300.0

    def delay_s(self, attempts: int, *, jitter: float) -> float:
        """The wait before the next try after ``attempts`` failures (``jitter`` in [0, 1) spreads senders)."""
        grown: float = self.base_s * 2.0 ** max(0, attempts - 1)
        return min(self.max_s, grown) * (0.75 + 0.5 * jitter)


Target = WebhookTarget | SlackTarget | EmailTarget


@dataclasses.dataclass(frozen=True, kw_only=True)
class NotifyConfig:
    """The inbox's public URL (for deep links), the channels and the retry policy."""

    public_url: str = "http://127.0.0.1:8765"
    targets: tuple[Target, ...] = ()
    retry: RetryPolicy = RetryPolicy()
    poll_interval_s: float = 0.5

    def link(self, target_id: str, run_id: str = "") -> str:
        """The inbox card of one request."""
        from urllib.parse import quote

        suffix = f"?run={quote(run_id, safe='')}" if run_id else ""
        return f"{self.public_url.rstrip('/')}/#/approvals/{quote(target_id, safe='')}{suffix}"

    def run_link(self, run_id: str) -> str:
        """The inbox's view of one run."""
        from urllib.parse import quote

        return f"{self.public_url.rstrip('/')}/#/runs/{quote(run_id, safe='')}"


_KNOWN = {
    "webhook": {"name", "url", "url_env", "secret", "secret_env", "timeout_s", "tools", "rules", "roles"},
    "slack": {
        "name",
        "webhook_url",
        "webhook_url_env",
        "bot_token",
        "bot_token_env",
        "channel",
        "api_url",
        "timeout_s",
        "tools",
        "rules",
        "roles",
    },
    "email": {
        "name",
        "smtp_host",
        "smtp_port",
        "starttls",
        "ssl",
        "username",
        "username_env",
        "password",
        "password_env",
        "sender",
        "to",
        "timeout_s",
        "tools",
        "rules",
        "roles",
    },
}


def _secret(where: str, table: Mapping[str, Any], key: str, env: Mapping[str, str], *, required: bool) -> str:
    inline = table.get(key)
    env_name = table.get(f"{key}_env")
    if inline is not None and env_name is not None:
        raise ConfigError(f"{where}: give {key!r} or {key + '_env'!r}, not both")
    if env_name is not None:
        if not isinstance(env_name, str) or not env_name:
            raise ConfigError(f"{where}: {key + '_env'!r} must name an environment variable")
        value = env.get(env_name, "")
        if required and not value:
            raise ConfigError(f"{where}: environment variable {env_name} (for {key!r}) is not set")
        return value
    if inline is None:
        if required:
            raise ConfigError(f"{where}: {key!r} (or {key + '_env'!r}) is required")
        return ""
    if not isinstance(inline, str):
        raise ConfigError(f"{where}: {key!r} must be a string")
    return inline


def _strings(where: str, table: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: {key!r} must be a list of non-empty strings")
    return tuple(value)


def _number(where: str, table: Mapping[str, Any], key: str, default: float, *, minimum: float = 0.0) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value < 1e9:
        raise ConfigError(f"{where}: {key!r} must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _http_url(where: str, url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: the URL must start with http:// or https://")
    return url


def _target(kind: str, index: int, table: Any, env: Mapping[str, str], names: set[str]) -> Target:
    if not isinstance(table, dict):
        raise ConfigError(f"[[{kind}]] #{index + 1} must be a table")
    name = table.get("name")
    where = f"[[{kind}]] {name!r}" if isinstance(name, str) else f"[[{kind}]] #{index + 1}"
    unknown = sorted(set(table) - _KNOWN[kind])
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KNOWN[kind]))})")
    if not isinstance(name, str) or not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"{where}: 'name' is required (letters, digits, '-' and '_')")
    if f"{kind}:{name}" in names:
        raise ConfigError(f"{where}: a second {kind} channel named {name!r}")
    names.add(f"{kind}:{name}")
    filters = {
        "tools": _strings(where, table, "tools"),
        "rules": _strings(where, table, "rules"),
        "roles": _strings(where, table, "roles"),
    }
    timeout = _number(where, table, "timeout_s", 10.0 if kind != "email" else 20.0, minimum=0.1)
    if kind == "webhook":
        return WebhookTarget(
            name=name,
            url=_http_url(where, _secret(where, table, "url", env, required=True)),
            secret=_secret(where, table, "secret", env, required=True),
            timeout_s=timeout,
            **filters,
        )
    if kind == "slack":
        webhook_url = _secret(where, table, "webhook_url", env, required=False)
        bot_token = _secret(where, table, "bot_token", env, required=False)
        channel = table.get("channel", "")
        if bool(webhook_url) == bool(bot_token):
            raise ConfigError(f"{where}: give either a webhook_url or a bot_token (with a channel)")
        if bot_token and (not isinstance(channel, str) or not channel):
            raise ConfigError(f"{where}: a bot_token needs the 'channel' to post in")
        return SlackTarget(
            name=name,
            webhook_url=_http_url(where, webhook_url) if webhook_url else "",
            bot_token=bot_token,
            channel_id=channel if isinstance(channel, str) else "",
            api_url=_http_url(where, str(table.get("api_url", "https://slack.com/api"))),
            timeout_s=timeout,
            **filters,
        )
    host, sender = table.get("smtp_host"), table.get("sender")
    if not isinstance(host, str) or not host:
        raise ConfigError(f"{where}: 'smtp_host' is required")
    if not isinstance(sender, str) or "@" not in sender:
        raise ConfigError(f"{where}: 'sender' must be a mail address")
    to = _strings(where, table, "to")
    if not to or not all("@" in a for a in to):
        raise ConfigError(f"{where}: 'to' must list at least one mail address")
    for flag in ("starttls", "ssl"):
        if not isinstance(table.get(flag, False), bool):
            raise ConfigError(f"{where}: {flag!r} must be true or false")
    port = table.get("smtp_port", 587)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"{where}: 'smtp_port' must be a port number")
    return EmailTarget(
        name=name,
        smtp_host=host,
        smtp_port=port,
        starttls=bool(table.get("starttls", not table.get("ssl", False))),
        ssl=bool(table.get("ssl", False)),
        username=_secret(where, table, "username", env, required=False),
        password=_secret(where, table, "password", env, required=False),
        sender=sender,
        to=to,
        timeout_s=timeout,
        **filters,
    )


def notify_config_from_mapping(data: Mapping[str, Any], *, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """Build a :class:`NotifyConfig` from parsed TOML; raises :class:`ConfigError` naming what is wrong."""
    env = os.environ if env is None else env
    unknown = sorted(set(data) - {"public_url", "webhook", "slack", "email", "retry", "poll_interval_s"})
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)} (known: public_url, webhook, slack, email, retry)")
    public_url = env.get("GOLDFIVE_PUBLIC_URL") or data.get("public_url", "http://127.0.0.1:8765")
    if not isinstance(public_url, str):
        raise ConfigError("'public_url' must be a string")
    _http_url("public_url", public_url)
    names: set[str] = set()
    targets: list[Target] = []
    for kind in ("webhook", "slack", "email"):
        tables = data.get(kind, [])
        if not isinstance(tables, list):
            raise ConfigError(f"'{kind}' must be an array of tables ([[{kind}]])")
        targets += [_target(kind, i, t, env, names) for i, t in enumerate(tables)]
    retry_table = data.get("retry", {})
    if not isinstance(retry_table, dict) or set(retry_table) - {"max_attempts", "base_s", "max_s"}:
        raise ConfigError("[retry] takes max_attempts, base_s and max_s")
    retry = RetryPolicy(
        max_attempts=int(_number("[retry]", retry_table, "max_attempts", 8, minimum=1)),
        base_s=_number("[retry]", retry_table, "base_s", 2.0, minimum=0.0),
        max_s=_number("[retry]", retry_table, "max_s", 300.0, minimum=0.0),
    )
    poll = _number("config", data, "poll_interval_s", 0.5, minimum=0.01)
    return NotifyConfig(public_url=public_url, targets=tuple(targets), retry=retry, poll_interval_s=poll)


def load_notify_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> NotifyConfig:
    """Read the notification config from ``path`` (default: env ``GOLDFIVE_NOTIFY``; none → no channels)."""
    env = os.environ if env is None else env
    location = path if path is not None else env.get("GOLDFIVE_NOTIFY", "")
    if not location:
        return notify_config_from_mapping({}, env=env)
    file = Path(location)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the notification config: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    try:
        return notify_config_from_mapping(data, env=env)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc}") from None
