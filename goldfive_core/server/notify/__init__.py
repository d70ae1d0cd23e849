"""Notifications: tell people where they are (webhook, Slack, email) that an agent waits for them.

``goldfive serve --notify FILE`` (or env ``GOLDFIVE_NOTIFY``) runs a
:class:`Notifier` that reads the audit log and sends, for each approval request
and each escalation, a message with a link to the inbox card — never an approve
button in the chat itself — and a follow-up when the request is decided, times
out or is cancelled. Delivery is durable (an outbox in the store, retried with
backoff, once per event across several ``serve`` processes). Webhooks are signed:
see :func:`verify_webhook`.
"""

from ._channels import DeliveryError, HttpPost, slack_blocks
from ._config import EmailTarget, NotifyConfig, RetryPolicy, SlackTarget, WebhookTarget, load_notify_config
from ._notice import Notice, notice_for
from ._service import Notifier
from ._signing import IDEMPOTENCY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign_webhook, verify_webhook

__all__ = [
    "DeliveryError",
    "EmailTarget",
    "HttpPost",
    "IDEMPOTENCY_HEADER",
    "Notice",
    "Notifier",
    "NotifyConfig",
    "RetryPolicy",
    "SIGNATURE_HEADER",
    "SlackTarget",
    "TIMESTAMP_HEADER",
    "WebhookTarget",
    "load_notify_config",
    "notice_for",
    "sign_webhook",
    "slack_blocks",
    "verify_webhook",
]
