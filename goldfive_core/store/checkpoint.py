"""Signed checkpoints of the audit chain: what makes a rewrite of history by a database writer detectable.

The hash chain alone catches careless edits, but anyone who can write the database can recompute
every hash after an edit, and the head with them. A **checkpoint** is the chain head (its ``seq``
and hash) signed with an Ed25519 key that lives outside the database (``goldfive serve`` holds it).
Kept outside the database too (a file, a log, an agent's cache), it pins the prefix of the chain it
covers: ``verify_chain(store, checkpoint, public_key=...)`` re-walks the chain and fails when the
row at the checkpoint's position is gone or hashes differently — an edit, deletion or reordering
anywhere up to it, or a truncation below it, whatever the writer did to the head.

The format is a C2SP signed note (``tlog-checkpoint``)::

    <origin>
    <seq of the head row>
    <base64 of the head hash (32 bytes)>

    — <origin> <base64(4-byte key id ‖ 64-byte Ed25519 signature)>

The key id is the first 4 bytes of ``SHA-256(origin ‖ "\\n" ‖ 0x01 ‖ public key)``; the signature
covers the three body lines. Needs the ``cryptography`` package (``pip install 'goldfive[server]'``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any

from ..errors import GoldfiveError, MissingExtraError
from .base import AuditReport, Store

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "load_public_key",
    "make_checkpoint",
    "parse_checkpoint",
    "verify_chain",
    "write_checkpoint",
]

_DASH = "\u2014"


class CheckpointError(GoldfiveError):
    """A checkpoint is malformed, signed by another key, or for another log."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """A verified checkpoint: the chain had row ``seq`` with hash ``head_hash`` when ``origin`` signed it."""

    origin: str
    seq: int
    head_hash: str


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingExtraError("goldfive_core.store.checkpoint (signed checkpoints)", "server") from exc
    return ed25519


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _key_id(origin: str, public_key: Ed25519PublicKey) -> bytes:
    return hashlib.sha256(origin.encode() + b"\n\x01" + _raw_public(public_key)).digest()[:4]


def _check_origin(origin: str) -> None:
    if not origin or any(ch.isspace() for ch in origin) or _DASH in origin or "+" in origin:
        raise CheckpointError(f"origin must be one word without spaces, '+' or an em dash, got {origin!r}")


def make_checkpoint(origin: str, seq: int, head_hash: str, private_key: Ed25519PrivateKey) -> str:
    """The signed note for chain row ``seq`` with hash ``head_hash`` (hex)."""
    _check_origin(origin)
    root = bytes.fromhex(head_hash)
    body = f"{origin}\n{seq}\n{base64.b64encode(root).decode()}\n"
    signature = private_key.sign(body.encode())
    stamp = base64.b64encode(_key_id(origin, private_key.public_key()) + signature).decode()
    return f"{body}\n{_DASH} {origin} {stamp}\n"


def write_checkpoint(store: Store, private_key: Ed25519PrivateKey, *, origin: str) -> str:
    """Sign the store's current chain head; returns the note to keep **outside** the database."""
    seq, head_hash = store.audit_head()
    return make_checkpoint(origin, seq, head_hash, private_key)


def parse_checkpoint(note: str, public_key: Ed25519PublicKey, *, origin: str) -> Checkpoint:
    """Check the note's signature by ``public_key`` for ``origin``; returns what it vouches for."""
    _check_origin(origin)
    body, sep, signatures = note.partition("\n\n")
    if not sep:
        raise CheckpointError("not a signed note: no blank line between the body and the signatures")
    lines = body.split("\n")
    if len(lines) < 3:
        raise CheckpointError("checkpoint body must have an origin, a size and a root hash")
    if lines[0] != origin:
        raise CheckpointError(f"checkpoint is for log {lines[0]!r}, not {origin!r}")
    try:
        seq = int(lines[1])
        root = base64.b64decode(lines[2], validate=True)
    except (ValueError, binascii.Error):
        raise CheckpointError("checkpoint size or root hash is malformed") from None
    if seq < 0 or len(root) != 32:
        raise CheckpointError("checkpoint size must be >= 0 and its root a 32-byte hash")
    signed = (body + "\n").encode()
    key_id = _key_id(origin, public_key)
    for line in signatures.strip("\n").split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _DASH or parts[1] != origin:
            continue
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except binascii.Error:
            continue
        if blob[:4] != key_id:
            continue  # another key (a witness): ignored
        from cryptography.exceptions import InvalidSignature

        try:
            public_key.verify(blob[4:], signed)
        except InvalidSignature:
            raise CheckpointError("the checkpoint's signature does not verify with the given public key") from None
        return Checkpoint(origin=origin, seq=seq, head_hash=root.hex())
    raise CheckpointError("the checkpoint carries no signature by the given public key")


def verify_chain(store: Store, checkpoint: str, *, public_key: Ed25519PublicKey, origin: str) -> AuditReport:
    """:meth:`Store.verify_audit`, plus: the chain still holds the row the signed checkpoint vouches for.

    A writer without the private key can rewrite rows and recompute the chain and its head, but not
    the checkpoint: the row at the checkpoint's position then hashes differently (or is gone).
    """
    report = store.verify_audit()
    problems = list(report.problems)
    try:
        point = parse_checkpoint(checkpoint, public_key, origin=origin)
    except CheckpointError as exc:
        problems.append(f"checkpoint refused: {exc}")
    else:
        rows = store.audit_rows(after_seq=point.seq - 1, limit=1) if point.seq else []
        if point.seq and (not rows or rows[0].seq != point.seq):
            problems.append(f"the signed checkpoint vouches for row {point.seq}, which is gone: history was cut")
        elif point.seq and rows[0].hash != point.head_hash:
            problems.append(
                f"row {point.seq} hashes to {rows[0].hash[:16]}… but the signed checkpoint says "
                f"{point.head_hash[:16]}…: the chain up to it was rewritten"
            )
        head_seq, _ = store.audit_head()
        if head_seq < point.seq:
            problems.append(f"the chain head (row {head_seq}) is behind the signed checkpoint (row {point.seq})")
    return dataclasses.replace(report, ok=not problems, problems=tuple(problems))


def load_public_key(text: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo) or base64 of its 32 raw bytes."""
    ed25519 = _ed25519()
    data = text.strip()
    key: object
    if data.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives import serialization

        try:
            key = serialization.load_pem_public_key(data.encode())
        except ValueError:
            raise CheckpointError("the public key PEM does not parse") from None
    else:
        try:
            key = ed25519.Ed25519PublicKey.from_public_bytes(base64.b64decode(data, validate=True))
        except (ValueError, binascii.Error):
            raise CheckpointError("the public key must be PEM or base64 of 32 raw bytes") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise CheckpointError("the public key is not an Ed25519 key")
    result: Ed25519PublicKey = key
    return result
