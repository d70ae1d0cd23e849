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

``goldfive serve`` signs them with its decision-signing key (:class:`CheckpointWriter`, every
``--checkpoint-every`` seconds while the head moves, into ``--checkpoint FILE``); the public half is
the ``GOLDFIVE_TRUST_KEY`` value it prints, which ``goldfive audit verify --public-key`` accepts.
A checkpoint never launders: the writer verifies what was written since its previous one, including that
every decision the server signed since is still signed on its record and every row the server wrote itself
since (:meth:`CheckpointWriter.vouch_events`) still reads as written, and refuses (with an alarm on the
audit log, ``checkpoint_refused``) to sign a chain that does not verify.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import CheckpointError, MissingExtraError
from ..pb.v1 import events_pb2
from ..signing import DecisionSigner, TrustKey
from .agents import append_server_event
from .audit import GENESIS_HASH, Vouched, verify_since
from .base import ApprovalRow, AuditReport, AuditRow, Store, StoreError, StoreUnavailableError
from .witness import Appended, witnessed

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "CheckpointWriter",
    "SigningKey",
    "load_public_key",
    "make_checkpoint",
    "parse_checkpoint",
    "verify_chain",
    "write_checkpoint",
]

_DASH = "\u2014"

logger = logging.getLogger(__name__)

SigningKey: TypeAlias = "Ed25519PrivateKey | DecisionSigner"
"""What signs a checkpoint: an Ed25519 private key, or ``goldfive serve``'s :class:`DecisionSigner`."""


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


def _key_id(origin: str, public_key: Ed25519PublicKey | bytes) -> bytes:
    raw = public_key if isinstance(public_key, bytes) else _raw_public(public_key)
    return hashlib.sha256(origin.encode() + b"\n\x01" + raw).digest()[:4]


def _check_origin(origin: str) -> None:
    if not origin or any(ch.isspace() for ch in origin) or _DASH in origin or "+" in origin:
        raise CheckpointError(f"origin must be one word without spaces, '+' or an em dash, got {origin!r}")


def make_checkpoint(origin: str, seq: int, head_hash: str, private_key: SigningKey) -> str:
    """The signed note for chain row ``seq`` with hash ``head_hash`` (hex)."""
    _check_origin(origin)
    root = bytes.fromhex(head_hash)
    body = f"{origin}\n{seq}\n{base64.b64encode(root).decode()}\n"
    if isinstance(private_key, DecisionSigner):
        signature, public = private_key.sign_bytes(body.encode()), private_key.trust_key.raw
    else:
        signature, public = private_key.sign(body.encode()), _raw_public(private_key.public_key())
    stamp = base64.b64encode(_key_id(origin, public) + signature).decode()
    return f"{body}\n{_DASH} {origin} {stamp}\n"


def write_checkpoint(store: Store, private_key: SigningKey, *, origin: str) -> str:
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
    the checkpoint: the row at the checkpoint's position then hashes differently (or is gone). The same key
    signs decisions, so every decision signature on an approval record is verified with it too.
    """
    report = store.verify_audit(trust_key=trust_key_of(public_key))
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
        head_seq = _head_or_none(store)
        if head_seq is not None and head_seq < point.seq:
            problems.append(f"the chain head (row {head_seq}) is behind the signed checkpoint (row {point.seq})")
    return dataclasses.replace(report, ok=not problems, problems=tuple(problems))


def _head_or_none(store: Store) -> int | None:
    """The chain head's seq; None when its row was deleted (``verify_audit`` reports that as tampering)."""
    try:
        return store.audit_head()[0]
    except StoreUnavailableError:
        raise
    except StoreError:
        return None


def trust_key_of(public_key: Ed25519PublicKey) -> TrustKey:
    """The :class:`~goldfive_core.signing.TrustKey` (decision-signature checker) of a public key."""
    from cryptography.hazmat.primitives import serialization

    return TrustKey(public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def load_public_key(text: str) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo), base64 of its 32 raw bytes, or ``ed25519:<base64>``
    (the ``GOLDFIVE_TRUST_KEY`` value ``goldfive serve`` prints)."""
    ed25519 = _ed25519()
    data = text.strip()
    key: object
    if data.startswith("ed25519:"):  # the GOLDFIVE_TRUST_KEY form goldfive serve prints
        data = data[len("ed25519:") :]
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


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old file or the new one, whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class CheckpointWriter:
    """Keeps a signed checkpoint of ``store``'s chain head in ``path``, a file outside the database.

    :meth:`write` signs the current head when it moved since the last write and replaces the file
    atomically (the newest checkpoint covers every row the older ones did) — but only after verifying
    everything since the last one (:func:`~goldfive_core.store.audit.verify_since`: the chain still holds the
    head it signed last, every row since links, hashes and shows what it hashes, every approval record
    requested or decided since matches those events and its signature, every decision this server signed
    since (:meth:`vouch`) is still on its record, signed, and every row it wrote itself since
    (:meth:`vouch_events`) is still at its place, reading as written). A chain that does not verify is never signed: the
    last honest checkpoint stays, :attr:`refused` says why, and the alarm goes to the server's log and the
    audit log (a ``checkpoint_refused`` event, which ``goldfive audit verify`` reports). :meth:`run` does that
    every ``every_s`` seconds until cancelled, and once more on the way out. A store that cannot be reached is
    logged and tried again next time; it never stops the server.
    """

    settle_s: float = 2.0
    """How long a problem found among the newest rows must last before it is an alarm. An agent writes a
    decision's event and its ack (which puts the signature on the record) in two transactions, so a look
    between them sees a signed decision still unsigned; nothing is signed meanwhile."""

    def __init__(self, store: Store, key: SigningKey, path: str | Path, *, origin: str = "goldfive") -> None:
        _check_origin(origin)
        self.store = store
        self.key = key
        self.path = Path(path).expanduser()
        self.origin = origin
        self.written = 0
        """How many checkpoints this writer wrote."""
        self.refused = ""
        """Why the last :meth:`write` refused to sign ("" = it did not): the chain no longer extends the last
        checkpoint, or what was written since does not verify — someone rewrote history."""
        self._trust = trust_key_of(self._public())
        self.vouched_path = self.path.with_name(self.path.name + ".vouched")
        """Where the decisions signed and the rows written since the last checkpoint are kept (beside it, outside
        the database), so a server killed before its next checkpoint still holds them when it starts again."""
        self._vouched: set[Vouched]
        self._vouched_rows: set[Appended]
        self._vouched, self._vouched_rows = self._load_vouched()
        self._lock = threading.Lock()
        self._doubts: dict[str, float] = {}
        self._alarmed = ""
        self._last: tuple[int, str] | None = self._previous()

    def _public(self) -> Ed25519PublicKey:
        if isinstance(self.key, DecisionSigner):
            return load_public_key(self.key.trust_key.text())
        return self.key.public_key()

    def _previous(self) -> tuple[int, str] | None:
        """The checkpoint already in ``path`` if this key signed it (a restarted server continues from it)."""
        try:
            note = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        try:
            point = parse_checkpoint(note, self._public(), origin=self.origin)
        except CheckpointError as exc:
            logger.warning("%s holds no checkpoint of this key (%s); it will be replaced", self.path, exc)
            return None
        return point.seq, point.head_hash

    def vouch(self, run_id: str, target_id: str) -> None:
        """Note a decision this server signed and recorded: no checkpoint is signed while its record lacks it.

        Called by ``goldfive serve`` once a decision took effect (applied or recorded). Kept until a checkpoint
        covers it, in :attr:`vouched_path` too (written through before this returns): a server killed before its
        next checkpoint holds the decisions it signed to their records when it starts again.
        """
        self.vouch_many([(run_id, target_id)])

    def vouch_many(self, decisions: Sequence[tuple[str, str]]) -> None:
        """:meth:`vouch` for several decisions (``(run_id, target_id)`` each) at once: one write and one fsync of
        :attr:`vouched_path` for all of them (``goldfive serve`` vouches for a burst's decisions together). Every
        one is kept, in memory and on disk, before this returns."""
        items: list[Vouched] = []
        for run_id, target_id in decisions:
            try:
                row = self._record(run_id, target_id)
            except StoreError:
                row = None  # then its newest record is held to it
            items.append((run_id, target_id, -1 if row is None else row.requested_at_ms))
        if not items:
            return
        self._keep(items, [])

    def vouch_events(self, appended: Sequence[Appended]) -> None:
        """Note audit chain rows this server wrote itself (as :func:`~goldfive_core.store.witness.witnessed` returned
        them): no checkpoint is signed while one of them is gone or reads otherwise than as written.

        ``goldfive serve`` calls it before it answers a request that wrote rows of its own (a grant revocation, a
        refusal, the ledger changes an agent asks for, a decision it records) — not the events an agent posts,
        which are the agent's account. Each row is read back first: one of an attempt that rolled back (a write
        retried through an outage) is not the server's and is dropped. Kept, in memory and in
        :attr:`vouched_path`, before this returns, until a checkpoint covers them.
        """
        if not appended:
            return
        found = self._rows_at(sorted({a.seq for a in appended}))
        kept = [a for a in appended if _reads_as_written(found.get(a.seq), a)]
        if len(kept) < len(appended):
            logger.info(
                "%d row(s) noted as written were not committed (an attempt retried); not vouched for",
                len(appended) - len(kept),
            )
        if kept:
            self._keep([], kept)

    def _keep(self, decisions: Sequence[Vouched], rows: Sequence[Appended]) -> None:
        """Hold ``decisions`` and ``rows`` until a checkpoint covers them: in memory and, written through, on disk."""
        lines = "".join(_decision_line(item) for item in decisions) + "".join(_row_line(a) for a in rows)
        with self._lock:
            self._vouched.update(decisions)
            self._vouched_rows.update(rows)
            try:
                self.vouched_path.parent.mkdir(parents=True, exist_ok=True)
                with self.vouched_path.open("a", encoding="utf-8") as out:
                    out.write(lines)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:  # held in memory still: only a crash before the next checkpoint forgets them
                logger.error(
                    "could not keep %d signed decision(s) and %d written row(s) in %s: %s",
                    len(decisions),
                    len(rows),
                    self.vouched_path,
                    exc,
                )

    def _rows_at(self, seqs: Sequence[int]) -> dict[int, AuditRow]:
        """The chain rows numbered ``seqs`` (sorted) that exist, read in as few pages as they allow."""
        found: dict[int, AuditRow] = {}
        wanted = set(seqs)
        i = 0
        while i < len(seqs):
            first = seqs[i]
            page = self.store.audit_rows(after_seq=first - 1, limit=min(max(seqs[-1] - first + 1, 1), 2000))
            found.update((row.seq, row) for row in page if row.seq in wanted)
            last = page[-1].seq if page else first
            while i < len(seqs) and seqs[i] <= max(last, first):
                i += 1
        return found

    def _load_vouched(self) -> tuple[set[Vouched], set[Appended]]:
        """The decisions signed and the rows written since the last checkpoint, as :meth:`vouch_many` and
        :meth:`vouch_events` kept them (none: a fresh start)."""
        try:
            text = self.vouched_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return set(), set()
        except (OSError, UnicodeDecodeError) as exc:
            logger.error("the signed decisions kept in %s cannot be read: %s", self.vouched_path, exc)
            return set(), set()
        found: set[Vouched] = set()
        rows: set[Appended] = set()
        for number, line in enumerate(text.splitlines(), 1):
            try:
                item = json.loads(line)
                if "seq" in item:
                    seq, event_id, kind, digest = item["seq"], item["event_id"], item["kind"], item["body_sha256"]
                else:
                    run_id, target_id, at = item["run_id"], item["target_id"], item["requested_at_ms"]
            except (ValueError, TypeError, KeyError):
                logger.error("%s line %d is not a kept decision or row; skipped", self.vouched_path, number)
                continue
            if "seq" in item:
                if isinstance(seq, int) and all(isinstance(v, str) for v in (event_id, kind, digest)):
                    rows.add(Appended(seq, event_id, kind, digest))
            elif isinstance(run_id, str) and isinstance(target_id, str) and isinstance(at, int):
                found.add((run_id, target_id, at))
        if found or rows:
            logger.info(
                "%d decision(s) signed and %d row(s) written before a restart are held to what they say",
                len(found),
                len(rows),
            )
        return found, rows

    def _extends_last(self, head: tuple[int, str]) -> str:
        """ "" when the chain still holds the last signed head (it only grew); else what is wrong."""
        if self._last is None or self._last[0] == 0:
            return ""
        seq, digest = self._last
        if head[0] < seq:
            return f"the chain head (row {head[0]}) is behind the last signed checkpoint (row {seq}): history was cut"
        rows = self.store.audit_rows(after_seq=seq - 1, limit=1)
        if not rows or rows[0].seq != seq:
            return f"row {seq}, vouched for by the last signed checkpoint, is gone: history was cut"
        if rows[0].hash != digest:
            return f"row {seq} no longer hashes as the last signed checkpoint says: the chain up to it was rewritten"
        return ""

    def _rows(self, after: int, until: int) -> Iterator[AuditRow]:
        while after < until:
            page = self.store.audit_rows(after_seq=after, limit=2000)
            if not page:
                return
            for row in page:
                if row.seq > until:
                    return
                yield row
            after = page[-1].seq

    def _record(self, run_id: str, target_id: str) -> ApprovalRow | None:
        try:
            rows = self.store.approvals_for(target_id)
        except (ValueError, TypeError, RecursionError) as exc:  # a record edited into what cannot be read
            raise StoreError(f"the approval record {target_id!r} cannot be read (edited?): {exc}") from None
        return next((r for r in rows if r.run_id == run_id), None)

    def _check(self) -> tuple[tuple[int, str], set[Vouched], set[Appended], list[str], bool]:
        """The head, the decisions and rows vouched for so far (those the head covers), what is wrong since the
        last checkpoint ([]: nothing), and whether that is certain (the signed prefix itself changed, or a row the
        server wrote was rewritten) rather than maybe a write half-done."""
        with self._lock:  # before the head is read: each of these rows was committed by then, so the head covers it
            rows = set(self._vouched_rows)
        try:
            head = self.store.audit_head()
        except StoreUnavailableError:
            raise
        except StoreError:
            return (-1, ""), set(), set(), ["the chain head row is missing (deleted): history may have been cut"], True
        with self._lock:
            vouched = set(self._vouched)
        if head == self._last and not vouched and not rows:
            return head, vouched, rows, [], False
        cut = self._extends_last(head)
        if cut:
            return head, vouched, rows, [cut], True
        start = self._last or (0, GENESIS_HASH)
        since = verify_since(
            self._rows(start[0], head[0]),
            start=start,
            head=head,
            record=self._record,
            trust=self._trust,
            vouched=vouched,
        )
        rewritten = self._written_problems(rows)
        return head, vouched, rows, since + rewritten, bool(rewritten)

    def _written_problems(self, rows: set[Appended]) -> list[str]:
        """Each row this server wrote (:meth:`vouch_events`) still at its place, reading as written."""
        found = self._rows_at(sorted({a.seq for a in rows}))
        problems: list[str] = []
        for a in sorted(rows):
            row = found.get(a.seq)
            what = f"the {a.kind} event {a.event_id!r} this server wrote at row {a.seq}"
            if row is None:
                problems.append(f"{what} is gone (deleted): history was rewritten")
            elif row.event_id != a.event_id:
                problems.append(f"{what} was replaced by {row.event_id!r} ({row.kind}): history was rewritten")
            elif not _reads_as_written(row, a):
                problems.append(f"{what} no longer reads as written (edited): history was rewritten")
        return problems

    def write(self) -> bool:
        """Sign and save the head if it moved and everything since the last checkpoint verifies; True when written.

        A chain that does not verify is never signed (that would launder a rewrite): the old checkpoint stays
        in place, ``refused`` says why, and it is logged as an error and put on the audit log. A problem among
        the newest rows is first given :attr:`settle_s` to clear (a decision half-written), unsigned meanwhile.
        """
        head, vouched, rows, problems, certain = self._check()
        if problems:
            return self._refuse(head, problems, certain=certain)
        self._doubts = {}
        self.refused = ""
        if head == self._last:
            self._forget(vouched, rows)
            return False
        self._save(make_checkpoint(self.origin, head[0], head[1], self.key))
        self._last = head
        self._forget(vouched, rows)
        self.written += 1
        return True

    def _forget(self, vouched: set[Vouched], rows: set[Appended]) -> None:
        """A checkpoint covers ``vouched`` and ``rows``: drop them (also from :attr:`vouched_path`)."""
        with self._lock:
            if not vouched & self._vouched and not rows & self._vouched_rows:
                return
            self._vouched -= vouched
            self._vouched_rows -= rows
            text = "".join(_decision_line(v) for v in sorted(self._vouched))
            text += "".join(_row_line(a) for a in sorted(self._vouched_rows))
            try:
                _replace(self.vouched_path, text)
            except OSError as exc:  # the next checkpoint holds them again: a stale line only costs a look
                logger.warning("could not update %s: %s", self.vouched_path, exc)

    def _refuse(self, head: tuple[int, str], problems: list[str], *, certain: bool) -> bool:
        now = time.monotonic()
        self._doubts = {p: self._doubts.get(p, now) for p in problems}  # when each was first seen
        lasting = [p for p in problems if certain or now - self._doubts[p] >= self.settle_s]
        if not lasting:
            return False  # maybe decisions half-written: look again next time, unsigned meanwhile
        problem = "; ".join(lasting)
        if problem != self.refused:
            logger.error("audit checkpoint NOT signed: %s (see goldfive audit verify --checkpoint)", problem)
        self.refused = problem
        if problem != self._alarmed:
            self._alarm(head, problem)
        return False

    def _alarm(self, head: tuple[int, str], problem: str) -> None:
        """Put the refusal on the audit log (``checkpoint_refused``), where ``audit verify`` reports it."""
        event = events_pb2.Event(event_id=f"ev-checkpoint-refused-{os.urandom(8).hex()}")
        refused = event.checkpoint_refused
        refused.reason = problem[:2000]
        refused.signed_seq = self._last[0] if self._last else 0
        refused.head_seq = head[0]
        refused.key_id = self._trust.key_id
        try:
            _, appended = witnessed(append_server_event, self.store, event)
            self.vouch_events(appended)  # the alarm is the server's own row too: its deletion is one more
        except StoreError as exc:
            logger.error("could not put the refused checkpoint on the audit log (tried again later): %s", exc)
            return
        self._alarmed = problem

    def _save(self, note: str) -> None:
        _replace(self.path, note)

    def _write_logged(self) -> None:
        try:
            self.write()
        except (StoreError, OSError) as exc:
            logger.warning("audit checkpoint not written to %s (tried again later): %s", self.path, exc)

    async def run(self, every_s: float) -> None:
        """Write a checkpoint now and every ``every_s`` seconds while the head moves (until cancelled)."""
        try:
            while True:
                await asyncio.to_thread(self._write_logged)
                await asyncio.sleep(every_s)
        finally:
            self._write_logged()  # the rows written since the last tick are covered too


def _decision_line(item: Vouched) -> str:
    run_id, target_id, at = item
    return json.dumps({"run_id": run_id, "target_id": target_id, "requested_at_ms": at}) + "\n"


def _row_line(a: Appended) -> str:
    return json.dumps({"seq": a.seq, "event_id": a.event_id, "kind": a.kind, "body_sha256": a.body_sha256}) + "\n"


def _reads_as_written(row: AuditRow | None, a: Appended) -> bool:
    """Whether ``row`` is the row ``a`` noted, with the body it was written with."""
    return row is not None and row.event_id == a.event_id and hashlib.sha256(row.body).hexdigest() == a.body_sha256
