"""Signed decisions: ``goldfive serve`` signs what a person decided; an agent given the public key checks it.

Agents need write access to the store, so a row in the database proves nothing about who decided.
The server holds an Ed25519 private key in a file outside the database (mode 0600) and signs every
decision it writes. An agent started with the public key (``GOLDFIVE_TRUST_KEY`` or
``StoreChannel(trust_key=...)``) applies only decisions whose signature covers the exact target,
run, request (its id and :func:`~goldfive_core.approvals.request_digest`: prompt and arguments), decision,
edited arguments, argument digest, decider and channel — see :func:`check_decision`, the one function
every path that applies a decision from outside calls.

``cryptography`` is imported on first use only (``pip install 'goldfive[server]'``), so
``import goldfive_core`` stays free of it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._util import canonical_json, now_ms
from .errors import ConfigError, MissingExtraError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "DOMAIN",
    "EXPIRY_KIND",
    "TRUST_KEY_ENV",
    "DecisionSigner",
    "SignedDecision",
    "TrustKey",
    "check_decision",
    "decision_bytes",
    "load_or_create_signing_key",
    "trust_key_from_env",
]

DOMAIN = b"goldfive-decision-v1\n"
"""Prefix of every signed decision, so a signature made for something else never verifies as one."""

TRUST_KEY_ENV = "GOLDFIVE_TRUST_KEY"
"""An agent with this set (``ed25519:<base64>``, or a file holding that) applies only signed decisions."""

_PREFIX = "ed25519:"
_MAX_SIG_BLOCK = 2000


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError("signed decisions (the cryptography package)", "server") from exc
    return ed25519


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SignedDecision:
    """The facts a decision signature covers."""

    target_id: str
    run_id: str
    decision: str
    """``"approve"`` or ``"reject"``."""
    edited_args_json: str
    """Canonical JSON of the edited arguments; ``""`` when unchanged."""
    args_digest: str
    decided_by: str
    detail: str
    """The reason given (the model sees it), so it cannot be swapped either."""
    channel: str
    """How the person decided: ``web``, ``api`` or ``cli``."""
    grant: str = ""
    """The standing grant an approval asks for (``run``, ``session``, ``1h``); ``""`` for none."""
    grant_rule: str = ""
    """With a grant: the rule the deciding side allowed it under (the one that offers it); a run keeps the grant
    under that rule only. ``""`` without a grant (and in signatures made before the field existed)."""
    request_id: str = ""
    """The request decided (unique across re-asks of one target); ``""`` only for records made before it existed."""
    request_digest: str = ""
    """:func:`~goldfive_core.approvals.request_digest` of that request: what the person was shown and approved."""
    quorum: int = 0
    """How many distinct approvers the deciding server's rule requires, stated when more than one (0 = not stated):
    a trusting agent counts this decision as one vote towards that number, whatever its own rule says."""
    quorum_reject: str = ""
    """The deciding server's rule's ``reject`` mode with a stated quorum: ``"counts"`` (a rejection is one vote;
    the others may still reach the quorum) or ``""`` for the default, where a rejection ends the request."""
    answer: str = ""
    """``"cancel"`` on a rejection of an input request the person dismissed (``""``: a decline, any other)."""
    expiry: str = ""
    """``"rule"`` when this is the deciding server's record that its rule's ``expires`` passed for the request (a
    parked call replays it as a timeout, never a person's rejection); ``""`` for a decision."""


EXPIRY_KIND = "rule"
"""What a recorded expiry's signature states (:attr:`SignedDecision.expiry`): the deciding server's rule ended it."""

_OMITTED_WHEN_EMPTY = (
    "grant",
    "grant_rule",
    "request_id",
    "request_digest",
    "quorum",
    "quorum_reject",
    "answer",
    "expiry",
)


def decision_bytes(facts: SignedDecision, *, key_id: str, signed_at_ms: int) -> bytes:
    """The exact bytes signed: the domain tag and canonical JSON of every covered field."""
    body = dataclasses.asdict(facts)
    for name in _OMITTED_WHEN_EMPTY:  # a decision without them signs the same bytes as before they existed
        if not body[name]:
            del body[name]
    body["key_id"] = key_id
    body["signed_at_ms"] = signed_at_ms
    return DOMAIN + canonical_json(body).encode()


def _key_id(raw_public: bytes) -> str:
    return hashlib.sha256(raw_public).hexdigest()[:16]


def _edited_json(edited: Any) -> str:
    if edited is None or edited == "":
        return ""
    if isinstance(edited, str):  # already canonical JSON (a stored record)
        return edited
    return canonical_json(edited)


class TrustKey:
    """An Ed25519 public key an agent trusts to sign decisions."""

    def __init__(self, raw: bytes) -> None:
        if len(raw) != 32:
            raise ConfigError(f"an Ed25519 public key is 32 bytes, got {len(raw)}")
        self._key: Ed25519PublicKey = _crypto().Ed25519PublicKey.from_public_bytes(raw)
        self.raw = raw
        self.key_id = _key_id(raw)

    @classmethod
    def parse(cls, text: str) -> TrustKey:
        """``ed25519:<base64 of 32 bytes>``, or the path of a file holding that."""
        value = text.strip()
        if not value.startswith(_PREFIX) and Path(value).is_file():
            value = Path(value).read_text(encoding="utf-8").strip()
        if not value.startswith(_PREFIX):
            raise ConfigError(
                f"a trust key looks like 'ed25519:<base64>' (or names a file holding that), got {value[:40]!r}"
            )
        try:
            raw = base64.b64decode(value[len(_PREFIX) :], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"the trust key is not valid base64: {exc}") from None
        return cls(raw)

    def text(self) -> str:
        """The form ``GOLDFIVE_TRUST_KEY`` takes."""
        return _PREFIX + base64.b64encode(self.raw).decode()

    def verify(self, data: bytes, signature: bytes) -> bool:
        """True when ``signature`` is this key's signature of ``data``."""
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signature, data)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"TrustKey({self.key_id})"


def trust_key_from_env() -> TrustKey | None:
    """The key named by ``GOLDFIVE_TRUST_KEY``, or None when it is unset."""
    value = os.environ.get(TRUST_KEY_ENV, "").strip()
    return TrustKey.parse(value) if value else None


class DecisionSigner:
    """Signs decisions with the server's private key (see :func:`load_or_create_signing_key`)."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        from cryptography.hazmat.primitives import serialization

        self._key = key
        raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.trust_key = TrustKey(raw)
        self.key_id = self.trust_key.key_id

    def sign(self, facts: SignedDecision, *, signed_at_ms: int | None = None) -> dict[str, Any]:
        """The signature block a decision carries (``payload["signature"]``, stored with the record)."""
        at = now_ms() if signed_at_ms is None else signed_at_ms
        sig = self._key.sign(decision_bytes(facts, key_id=self.key_id, signed_at_ms=at))
        return {
            "alg": "ed25519",
            "key_id": self.key_id,
            "signed_at_ms": at,
            "channel": facts.channel,
            "sig": base64.b64encode(sig).decode(),
        }

    def sign_bytes(self, data: bytes) -> bytes:
        """A raw signature (for checkpoints of the audit chain)."""
        return self._key.sign(data)


def check_decision(
    trust: TrustKey,
    *,
    target_id: str,
    run_id: str,
    approved: bool,
    edited_args: Any,
    args_digest: str,
    decided_by: str,
    detail: str,
    signature: Any,
    grant: str = "",
    grant_rule: str = "",
    request_id: str = "",
    request_digest: str = "",
    quorum: int = 0,
    quorum_reject: str = "",
    answer: str = "",
    expiry: str = "",
) -> str | None:
    """None when ``signature`` is ``trust``'s signature of exactly this decision, else what is wrong.

    ``signature`` is the block :meth:`DecisionSigner.sign` made (a mapping, or its JSON text).
    The decision is rebuilt from the values the agent is about to apply — ``request_id`` and
    ``request_digest`` from the agent's own request — so a signature for another target, run,
    request, prompt, verdict, argument edit, digest, decider or reason does not verify.
    """
    if isinstance(signature, str):
        if not signature:
            return "the decision is not signed (this agent applies only decisions signed by its trusted key)"
        if len(signature) > _MAX_SIG_BLOCK:
            return "the decision's signature block is too large"
        import json

        try:
            signature = json.loads(signature)
        except ValueError:
            return "the decision's signature block is not JSON"
    if not signature:
        return "the decision is not signed (this agent applies only decisions signed by its trusted key)"
    if not isinstance(signature, Mapping):
        return f"the decision's signature must be an object, got {type(signature).__name__}"
    key_id, at, channel, sig = (signature.get(k) for k in ("key_id", "signed_at_ms", "channel", "sig"))
    if signature.get("alg") != "ed25519" or not isinstance(sig, str) or not isinstance(key_id, str):
        return "the decision's signature block is malformed (alg, key_id, sig)"
    if not isinstance(at, int) or isinstance(at, bool) or not isinstance(channel, str):
        return "the decision's signature block is malformed (signed_at_ms, channel)"
    if key_id != trust.key_id:
        return f"the decision was signed by key {key_id[:16]!r}, not the trusted key {trust.key_id!r}"
    try:
        raw_sig = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return "the decision's signature is not base64"
    try:
        edited = _edited_json(edited_args)
    except (TypeError, ValueError):
        return "the decision's edited arguments are not JSON"
    facts = SignedDecision(
        target_id=target_id,
        run_id=run_id,
        decision="approve" if approved else "reject",
        edited_args_json=edited,
        args_digest=args_digest,
        decided_by=decided_by,
        detail=detail,
        channel=channel,
        grant=grant,
        grant_rule=grant_rule,
        request_id=request_id,
        request_digest=request_digest,
        quorum=quorum,
        quorum_reject=quorum_reject,
        answer=answer,
        expiry=expiry,
    )
    if not trust.verify(decision_bytes(facts, key_id=key_id, signed_at_ms=at), raw_sig):
        return (
            "the decision's signature does not match what it claims "
            "(target, run, request, verdict, edits, digest, decider, reason, grant and its rule, quorum, reject mode, "
            "answer, expiry)"
        )
    return None


# -- the private key file ------------------------------------------------------------------------------------
def load_or_create_signing_key(path: str | Path) -> tuple[DecisionSigner, bool]:
    """Load the PEM (PKCS8) Ed25519 key at ``path``, creating it (mode 0600) when missing.

    Returns the signer and whether the key was created now. Refuses a key file that group or
    others may read or write (like OpenSSH), and any key that is not Ed25519.
    """
    ed25519 = _crypto()
    from cryptography.hazmat.primitives import serialization

    path = Path(path).expanduser()
    created = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = ed25519.Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            # O_EXCL + mode at creation: never a moment in which the key is readable by others.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another serve process created it first: load theirs
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
            created = True
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"signing key {path} has mode {mode:04o}; it must be readable by its owner only (chmod 600 {path})"
        )
    data = path.read_bytes()
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"signing key {path} is not a PEM private key: {exc}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise ConfigError(f"signing key {path} is a {type(key).__name__}, not an Ed25519 key")
    return DecisionSigner(key), created
