"""Webhook signatures: HMAC-SHA256 over the timestamp and the exact body, checked within a tolerance.

The sender puts the unix time (seconds) in ``Goldfive-Timestamp`` and
``v1=<hex hmac_sha256(secret, f"{timestamp}." + body)>`` in ``Goldfive-Signature``.
A receiver recomputes the MAC over the bytes it received, compares in constant
time and refuses a timestamp outside its tolerance, so a captured request cannot
be replayed later; ``Idempotency-Key`` lets it drop a redelivery of the same notice.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

__all__ = [
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "sign_webhook",
    "verify_webhook",
]

SIGNATURE_HEADER = "Goldfive-Signature"
TIMESTAMP_HEADER = "Goldfive-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"
DEFAULT_TOLERANCE_S = 300


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign_webhook(secret: str, body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    """The signature headers for ``body`` (``timestamp`` defaults to now, in unix seconds)."""
    if not secret:
        raise ValueError("a webhook secret must not be empty")
    ts = int(time.time()) if timestamp is None else int(timestamp)
    return {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: f"v1={_mac(secret, ts, body)}"}


def verify_webhook(
    secret: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> bool:
    """True when ``headers`` carry a valid signature of ``body`` made within ``tolerance_s`` of ``now``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ts = lowered.get(TIMESTAMP_HEADER.lower(), "")
    raw_sig = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not secret or not raw_ts.isdigit() or not raw_sig.startswith("v1="):
        return False
    ts = int(raw_ts)
    current = time.time() if now is None else now
    if abs(current - ts) > tolerance_s:
        return False
    return hmac.compare_digest(raw_sig[3:], _mac(secret, ts, body))
