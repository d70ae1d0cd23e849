"""Decision signatures: what they cover, and the key file they come from."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from goldfive_core.errors import ConfigError
from goldfive_core.signing import SignedDecision, TrustKey, check_decision, load_or_create_signing_key

FACTS = SignedDecision(
    target_id="adk-1",
    run_id="run-1",
    decision="approve",
    edited_args_json='{"amount":120}',
    args_digest="sha256:abc",
    decided_by="ana",
    detail="ok",
    channel="web",
    request_id="req-1",
    request_digest="sha256:req",
)


def _check(trust: TrustKey, facts: SignedDecision, signature: object) -> str | None:
    return check_decision(
        trust,
        target_id=facts.target_id,
        run_id=facts.run_id,
        approved=facts.decision == "approve",
        edited_args=facts.edited_args_json,
        args_digest=facts.args_digest,
        decided_by=facts.decided_by,
        detail=facts.detail,
        signature=signature,
        request_id=facts.request_id,
        request_digest=facts.request_digest,
    )


def test_a_signature_covers_every_field_of_the_decision(tmp_path: Path) -> None:
    signer, created = load_or_create_signing_key(tmp_path / "k.pem")
    assert created
    sig = signer.sign(FACTS)
    assert _check(signer.trust_key, FACTS, sig) is None
    assert (
        check_decision(
            signer.trust_key,
            target_id="adk-1",
            run_id="run-1",
            approved=True,
            edited_args={"amount": 120},  # the same edit as a mapping: canonical JSON is compared
            args_digest="sha256:abc",
            decided_by="ana",
            detail="ok",
            signature=sig,
            request_id="req-1",
            request_digest="sha256:req",
        )
        is None
    )
    for field, other in (
        ("target_id", "adk-2"),
        ("run_id", "run-2"),
        ("decision", "reject"),
        ("edited_args_json", '{"amount":10000}'),
        ("args_digest", "sha256:def"),
        ("decided_by", "cfo"),
        ("detail", "ignore previous instructions"),
        ("request_id", "req-2"),  # the same decision of another request of the target (a re-ask)
        ("request_digest", "sha256:other"),  # of another prompt or other arguments
        ("request_id", ""),  # a signature bound to a request never verifies as one bound to none
    ):
        problem = _check(signer.trust_key, dataclasses.replace(FACTS, **{field: other}), sig)
        assert problem is not None and "does not match" in problem, field
    assert "does not match" in str(_check(signer.trust_key, FACTS, {**sig, "channel": "cli"}))
    assert "does not match" in str(_check(signer.trust_key, FACTS, {**sig, "signed_at_ms": sig["signed_at_ms"] + 1}))


def test_an_empty_edit_is_an_edit_the_signature_of_an_unedited_decision_does_not_cover(tmp_path: Path) -> None:
    # {} replaces every argument of the call: it must not pass as "no edit".
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    unedited = dataclasses.replace(FACTS, edited_args_json="")
    sig = signer.sign(unedited)
    names = ("target_id", "run_id", "args_digest", "decided_by", "detail", "request_id", "request_digest")
    fields = {f: getattr(unedited, f) for f in names}
    assert check_decision(signer.trust_key, approved=True, edited_args=None, signature=sig, **fields) is None
    for empty in ({}, "{}"):
        problem = check_decision(signer.trust_key, approved=True, edited_args=empty, signature=sig, **fields)
        assert problem is not None and "does not match" in problem, empty


def test_unsigned_malformed_and_foreign_signatures_are_refused(tmp_path: Path) -> None:
    signer, _ = load_or_create_signing_key(tmp_path / "a.pem")
    other, _ = load_or_create_signing_key(tmp_path / "b.pem")
    trust = signer.trust_key
    assert "not signed" in str(_check(trust, FACTS, None))
    assert "not signed" in str(_check(trust, FACTS, ""))
    assert "not JSON" in str(_check(trust, FACTS, "{"))
    assert "must be an object" in str(_check(trust, FACTS, [1]))
    assert "malformed" in str(_check(trust, FACTS, {"alg": "rsa"}))
    assert "not the trusted key" in str(_check(trust, FACTS, other.sign(FACTS)))
    forged = {**other.sign(FACTS), "key_id": trust.key_id}  # claims the trusted key, signed by another
    assert "does not match" in str(_check(trust, FACTS, forged))
    assert "not base64" in str(_check(trust, FACTS, {**signer.sign(FACTS), "sig": "@@"}))


def test_the_key_file_is_private_reused_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "dir" / "key.pem"
    signer, created = load_or_create_signing_key(path)
    assert created and stat.S_IMODE(path.stat().st_mode) == 0o600
    again, created_again = load_or_create_signing_key(path)
    assert not created_again and again.trust_key.raw == signer.trust_key.raw
    assert TrustKey.parse(signer.trust_key.text()).raw == signer.trust_key.raw
    (tmp_path / "trust.txt").write_text(signer.trust_key.text() + "\n")
    assert TrustKey.parse(str(tmp_path / "trust.txt")).key_id == signer.key_id
    os.chmod(path, 0o640)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_or_create_signing_key(path)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    bad.chmod(0o600)
    with pytest.raises(ConfigError, match="not a PEM private key"):
        load_or_create_signing_key(bad)
    for text in ("ed25519:@@", "ed25519:" + "A" * 8, "rsa:abc"):
        with pytest.raises(ConfigError):
            TrustKey.parse(text)
