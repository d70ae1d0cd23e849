"""Signed checkpoints: a database writer without the key cannot rewrite the chain and its head unseen."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from store_support import PYTHON, Backend, make_event, wait_until

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import Store
from goldfive_core.store.audit import canonical_event_bytes, chain_hash
from goldfive_core.store.checkpoint import CheckpointError, parse_checkpoint, verify_chain, write_checkpoint


def _fill(store: Store, run: str, n: int = 4) -> None:
    store.append_events(
        [make_event(run, i, events_pb2.ApprovalGranted(target_id=f"{run}-t", decided_by="ann")) for i in range(n)],
        pid=1,
        host="h",
    )


def _rewrite_from(store: Store, seq: int, decided_by: str) -> None:
    """What an attacker with database access does: edit a row, recompute every later hash and the head."""
    conn = store.db.conn()  # type: ignore[attr-defined]
    rows = store.audit_rows()
    prev = next((r.hash for r in rows if r.seq == seq - 1), "0" * 64)
    for row in rows:
        if row.seq < seq:
            continue
        event = row.event()
        if row.seq == seq:
            event.approval_granted.decided_by = decided_by
        body = canonical_event_bytes(event)
        digest = chain_hash(prev, body)
        store.db.execute(
            conn, "UPDATE gf_audit SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?", (body, prev, digest, row.seq)
        )  # type: ignore[attr-defined]
        prev = digest
    store.db.execute(conn, "UPDATE gf_chain_head SET hash = ? WHERE id = 1", (prev,))  # type: ignore[attr-defined]


def test_a_rewrite_of_the_chain_and_its_head_is_caught_by_a_signed_checkpoint(backend: Backend, tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    public = key.public_key()
    store = backend.open()
    _fill(store, "run-a")
    note = write_checkpoint(store, key, origin="example.org/goldfive")
    _fill(store, "run-b")  # the log grows after the checkpoint
    assert verify_chain(store, note, public_key=public, origin="example.org/goldfive").ok

    _rewrite_from(store, 2, "mallory")
    assert store.verify_audit().ok  # the unkeyed chain alone is fooled ...
    report = verify_chain(store, note, public_key=public, origin="example.org/goldfive")
    assert not report.ok and "the chain up to it was rewritten" in report.problems[-1]  # ... the checkpoint is not

    # The same through the command line, with the checkpoint and the key kept outside the database.
    (tmp_path / "cp.txt").write_text(note)
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    (tmp_path / "key.pub").write_text(base64.b64encode(raw).decode())
    argv = ["audit", "verify", "--checkpoint", str(tmp_path / "cp.txt"), "--public-key", str(tmp_path / "key.pub")]
    cli = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv, "--origin", "example.org/goldfive"],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 1 and "rewritten" in cli.stdout, cli.stdout + cli.stderr


def test_a_truncation_below_the_checkpoint_is_caught(backend: Backend) -> None:
    key = Ed25519PrivateKey.generate()
    store = backend.open()
    _fill(store, "run-a", 6)
    note = write_checkpoint(store, key, origin="gf")
    conn = store.db.conn()  # type: ignore[attr-defined]
    last = store.audit_rows()[2]
    store.db.execute(conn, "DELETE FROM gf_audit WHERE seq > ?", (last.seq,))  # type: ignore[attr-defined]
    store.db.execute(conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (last.seq, last.hash))  # type: ignore[attr-defined]
    assert store.verify_audit().ok  # consistent without the checkpoint
    report = verify_chain(store, note, public_key=key.public_key(), origin="gf")
    assert not report.ok and "which is gone: history was cut" in " ".join(report.problems)


def test_a_checkpoint_from_another_key_or_log_or_edited_is_refused(sqlite_backend: Backend) -> None:
    key, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    store = sqlite_backend.open()
    _fill(store, "run-a")
    note = write_checkpoint(store, key, origin="gf")
    assert parse_checkpoint(note, key.public_key(), origin="gf").seq == store.audit_head()[0]
    for bad, public, origin, why in (
        (note, other.public_key(), "gf", "no signature by the given public key"),
        (note, key.public_key(), "elsewhere", "is for log 'gf'"),
        (note.replace("\n4\n", "\n3\n"), key.public_key(), "gf", "does not verify"),
        ("gf\n4\n", key.public_key(), "gf", "not a signed note"),
    ):
        try:
            parse_checkpoint(bad, public, origin=origin)
        except CheckpointError as exc:
            assert why in str(exc), (why, str(exc))
        else:
            raise AssertionError(f"accepted: {why}")


def _seq_of(path: Path) -> int:
    return int(path.read_text().split("\n")[1]) if path.exists() else -1


def test_the_writer_never_signs_a_rewritten_chain(sqlite_backend: Backend, tmp_path: Path) -> None:
    """A rewrite while the server runs is not laundered by its next checkpoint; a restarted writer continues."""
    from goldfive_core.signing import load_or_create_signing_key
    from goldfive_core.store.checkpoint import CheckpointWriter, load_public_key

    signer, _ = load_or_create_signing_key(tmp_path / "key.pem")
    store = sqlite_backend.open()
    _fill(store, "run-a")
    writer = CheckpointWriter(store, signer, tmp_path / "cp.txt")
    assert writer.write() and not writer.write()  # signed once; nothing moved since
    _fill(store, "run-b")
    assert writer.write() and _seq_of(tmp_path / "cp.txt") == store.audit_head()[0]
    signed = (tmp_path / "cp.txt").read_text()
    public = load_public_key(signer.trust_key.text())

    _rewrite_from(store, 2, "mallory")
    _fill(store, "run-c")  # the head moves on from the forged chain
    assert not writer.write()
    assert "the chain up to it was rewritten" in writer.refused
    assert (tmp_path / "cp.txt").read_text() == signed  # the last honest checkpoint stays
    assert not verify_chain(store, signed, public_key=public, origin="goldfive").ok
    # A restarted server picks the file up and still refuses.
    again = CheckpointWriter(store, signer, tmp_path / "cp.txt")
    assert not again.write() and "rewritten" in again.refused


def test_goldfive_serve_writes_checkpoints_that_audit_verify_checks(backend: Backend, tmp_path: Path) -> None:
    from tests.server.server_support import goldfive, serve_process

    store = backend.open()
    _fill(store, "run-a")
    checkpoint = tmp_path / "audit-checkpoint.txt"  # beside the key: the default
    with serve_process(backend, tmp_path / "key.pem", "--checkpoint-every", "0.1") as served:
        assert any(f"signed audit checkpoints go to {checkpoint}" in line for line in served.lines), served.lines
        public = served.trust_key.text()
        wait_until(lambda: _seq_of(checkpoint) == store.audit_head()[0], what="the first checkpoint")
        _fill(store, "run-b")  # the head moves: the next checkpoint covers it
        wait_until(lambda: _seq_of(checkpoint) == store.audit_head()[0], what="a checkpoint of the new head")
    argv = ["audit", "verify", "--checkpoint", str(checkpoint), "--public-key", public]
    ok = goldfive(backend, *argv)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    _rewrite_from(store, 3, "mallory")
    assert store.verify_audit().ok  # the chain alone is fooled
    caught = goldfive(backend, *argv)
    assert caught.returncode == 1 and "rewritten" in caught.stdout, caught.stdout + caught.stderr
    bad = goldfive(backend, "serve", "--checkpoint-every", "nan")
    assert bad.returncode == 2 and "--checkpoint-every must be 0-86400" in bad.stderr, bad.stderr
