"""Delivering one notice: a signed webhook, a Slack message (new, or the request's message updated), a mail.

Each ``deliver`` returns a small receipt (kept in the outbox: Slack's message
``ts``, the mail's ``Message-ID``) that a follow-up uses to answer in the same
thread, or raises :class:`DeliveryError` with a reason that names the channel
and never its URL or credentials.
"""

from __future__ import annotations

import asyncio
import email.message
import email.utils
import json
import smtplib
import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from ...errors import DeliveryError
from ._config import EmailTarget, SlackTarget, Target, WebhookTarget
from ._notice import Notice
from ._signing import IDEMPOTENCY_HEADER, sign_webhook

__all__ = ["DeliveryError", "HttpPost", "deliver"]


class HttpPost(Protocol):
    """The one HTTP call the channels make (httpx by default; tests may pass their own)."""

    async def __call__(
        self, url: str, *, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]: ...


async def httpx_post(url: str, *, body: bytes, headers: Mapping[str, str], timeout_s: float) -> tuple[int, bytes]:
    """POST with httpx; network errors become :class:`DeliveryError` without the URL."""
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - httpx comes with the server extra
        raise DeliveryError("notifications need httpx: pip install 'goldfive[server]'") from exc
    try:
        async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client:
            response = await client.post(url, content=body, headers=dict(headers))
    except httpx.HTTPError as exc:
        raise DeliveryError(f"{type(exc).__name__}") from None
    return response.status_code, response.content[:4096]


def _slack_escape(text: str) -> str:
    # Slack mrkdwn: only &, < and > are special; escaping them stops a model from writing links or mentions.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_blocks(notice: Notice) -> list[dict[str, Any]]:
    """The Slack message: title, the facts, and one button that opens the inbox card (no approve button)."""
    facts = "\n".join(f"*{k}:* {_slack_escape(v)}" for k, v in notice.lines())
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_slack_escape(notice.title)}*"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": facts or " "}},
    ]
    if not notice.follow_up:
        label = "Open in goldfive" if notice.kind != "escalation" else "Open the run"
        blocks.append(
            {
                "type": "actions",
                "elements": [{"type": "button", "text": {"type": "plain_text", "text": label}, "url": notice.link}],
            }
        )
    return blocks


async def _webhook(target: WebhookTarget, notice: Notice, event_json: Any, key: str, post: HttpPost) -> dict[str, Any]:
    body = json.dumps(
        {"event": event_json, "link": notice.link, "notice": notice.as_dict()}, sort_keys=True, ensure_ascii=False
    ).encode()
    headers = {
        "Content-Type": "application/json",
        IDEMPOTENCY_HEADER: key,
        "Goldfive-Event": notice.kind,
        **sign_webhook(target.secret, body),
    }
    status, _ = await post(target.url, body=body, headers=headers, timeout_s=target.timeout_s)
    if not 200 <= status < 300:
        raise DeliveryError(f"{target.channel}: HTTP {status}")
    return {"status": status}


async def _slack(
    target: SlackTarget, notice: Notice, prior: Mapping[str, Any] | None, post: HttpPost
) -> dict[str, Any]:
    message: dict[str, Any] = {"text": notice.title, "blocks": slack_blocks(notice)}
    if target.webhook_url:  # an incoming webhook can only post: a follow-up is a new message
        status, _ = await post(
            target.webhook_url,
            body=json.dumps(message).encode(),
            headers={"Content-Type": "application/json"},
            timeout_s=target.timeout_s,
        )
        if not 200 <= status < 300:
            raise DeliveryError(f"{target.channel}: HTTP {status}")
        return {"status": status}
    headers = {"Content-Type": "application/json; charset=utf-8", "Authorization": f"Bearer {target.bot_token}"}
    api = target.api_url.rstrip("/")
    updating = notice.follow_up and prior is not None and prior.get("ts")
    if updating:
        assert prior is not None
        # The request's message now says how it ended, and a reply in its thread pings the channel.
        method, payload = "chat.update", {"channel": prior["channel"], "ts": prior["ts"], **message}
    else:
        method, payload = "chat.postMessage", {"channel": target.channel_id, **message}
    status, raw = await post(
        f"{api}/{method}", body=json.dumps(payload).encode(), headers=headers, timeout_s=target.timeout_s
    )
    reply = _slack_reply(target, method, status, raw)
    if updating:
        assert prior is not None
        thread = {"channel": prior["channel"], "thread_ts": prior["ts"], "text": notice.title}
        status, raw = await post(
            f"{api}/chat.postMessage", body=json.dumps(thread).encode(), headers=headers, timeout_s=target.timeout_s
        )
        _slack_reply(target, "chat.postMessage", status, raw)
        return {"channel": prior["channel"], "ts": prior["ts"]}
    return {"channel": str(reply.get("channel", target.channel_id)), "ts": str(reply.get("ts", ""))}


def _slack_reply(target: SlackTarget, method: str, status: int, raw: bytes) -> dict[str, Any]:
    if not 200 <= status < 300:
        raise DeliveryError(f"{target.channel}: {method} HTTP {status}")
    try:
        reply = json.loads(raw)
    except ValueError:
        raise DeliveryError(f"{target.channel}: {method} answered with something that is not JSON") from None
    if not isinstance(reply, dict) or not reply.get("ok"):
        error = reply.get("error", "unknown") if isinstance(reply, dict) else "unknown"
        raise DeliveryError(f"{target.channel}: {method} refused: {str(error)[:80]}")
    return reply


def _mail(target: EmailTarget, notice: Notice, key: str, prior: Mapping[str, Any] | None) -> email.message.EmailMessage:
    msg = email.message.EmailMessage()
    msg["From"] = target.sender
    msg["To"] = ", ".join(target.to)
    # Subjects are one line: inert text has no line breaks, and the header class folds long ones.
    msg["Subject"] = f"[goldfive] {notice.title}"
    domain = target.sender.rsplit("@", 1)[-1]
    msg["Message-ID"] = f"<{key.replace(':', '.').replace('@', '.')}@{domain}>"
    msg["Date"] = email.utils.formatdate(localtime=False)
    if notice.follow_up and prior and prior.get("message_id"):
        msg["In-Reply-To"] = prior["message_id"]
        msg["References"] = prior["message_id"]
    msg.set_content(notice.as_text())
    return msg


def _send_mail(target: EmailTarget, msg: email.message.EmailMessage) -> None:
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if target.ssl:
        smtp = smtplib.SMTP_SSL(target.smtp_host, target.smtp_port, timeout=target.timeout_s, context=context)
    else:
        smtp = smtplib.SMTP(target.smtp_host, target.smtp_port, timeout=target.timeout_s)
    with smtp:
        if target.starttls and not target.ssl:
            smtp.starttls(context=context)
        if target.username:
            smtp.login(target.username, target.password)
        smtp.send_message(msg)


async def _email(target: EmailTarget, notice: Notice, key: str, prior: Mapping[str, Any] | None) -> dict[str, Any]:
    msg = _mail(target, notice, key, prior)
    try:
        await asyncio.to_thread(_send_mail, target, msg)
    except (OSError, smtplib.SMTPException) as exc:
        raise DeliveryError(f"{target.channel}: {type(exc).__name__}") from None
    return {"message_id": str(msg["Message-ID"])}


async def deliver(
    target: Target,
    notice: Notice,
    *,
    event_json: Any,
    key: str,
    prior: Mapping[str, Any] | None,
    post: HttpPost = httpx_post,
) -> dict[str, Any]:
    """Send ``notice`` on ``target``; the receipt is kept so a follow-up can answer in the same thread."""
    if isinstance(target, WebhookTarget):
        return await _webhook(target, notice, event_json, key, post)
    if isinstance(target, SlackTarget):
        return await _slack(target, notice, prior, post)
    return await _email(target, notice, key, prior)
