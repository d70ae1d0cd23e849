"""Benchmark: what the server's check before signing a checkpoint costs on a big store.

    python bench/checkpoint.py                     # SQLite, 50,000 decided requests (~100,000 audit rows)
    python bench/checkpoint.py -n 200000 --batch 200

Fills a store with ``-n`` requests, each decided (one in ten signed, through ``decide_in_store`` as the server
records a decision for a run that is not running; the rest as the local command line does, unsigned), then
times, with the server's key:

* the first checkpoint of the store (no previous one: the writer verifies every row from the start);
* ``goldfive audit verify --public-key``'s whole walk (``verify_audit(trust_key=...)``), for scale;
* the next checkpoint after ``--batch`` more requests and decisions (what a running server pays each tick
  while the log grows): only the rows since the last checkpoint, their records, and the decisions it vouched for.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from goldfive_core._util import canonical_json
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.signing import DecisionSigner, SignedDecision, load_or_create_signing_key
from goldfive_core.store import SqliteStore, Store
from goldfive_core.store.checkpoint import CheckpointWriter

PER_RUN = 100


def _event(run: str, seq: int, **payload: object) -> events_pb2.Event:
    event = events_pb2.Event(event_id=f"ev-{run}-{seq}", run_id=run, sequence=seq)
    event.emitted_at.FromMilliseconds(1_700_000_000_000 + seq)
    for name, value in payload.items():
        getattr(event, name).CopyFrom(value)
    return event


def fill(store: Store, signer: DecisionSigner, first: int, n: int, writer: CheckpointWriter | None = None) -> None:
    """``n`` requests from number ``first`` on, each decided: every tenth signed by the server, the rest unsigned."""
    for start in range(first, first + n, PER_RUN):
        run = f"run-{start // PER_RUN}"
        events: list[events_pb2.Event] = []
        for i in range(start, min(start + PER_RUN, first + n)):
            ask = events_pb2.ApprovalRequested(target_id=f"call-{i}", kind="task", prompt=f"pay {i}?", task_id="t")
            events.append(_event(run, len(events), approval_requested=ask))
            if i % 10:
                said = events_pb2.ApprovalGranted(target_id=f"call-{i}", decided_by="bo", channel="cli")
                events.append(_event(run, len(events), approval_granted=said))
        store.append_events(events, pid=1, host="bench")
        for i in range(start, min(start + PER_RUN, first + n), 10):
            _signed(store, signer, run, f"call-{i}")
            if writer is not None:
                writer.vouch(run, f"call-{i}")


def _signed(store: Store, signer: DecisionSigner, run: str, target: str) -> None:
    row = next(r for r in store.approvals_for(target) if r.run_id == run)
    facts = SignedDecision(
        target_id=target,
        run_id=run,
        decision="approve",
        edited_args_json="",
        args_digest=row.args_digest,
        decided_by="ana",
        detail="",
        channel="api",
    )
    signature = canonical_json(signer.sign(facts))
    assert store.decide_in_store(row.id, approved=True, detail="", decided_by="ana", channel="api", signature=signature)


def _timed(what: str, fn: object) -> float:
    started = time.perf_counter()
    result = fn()  # type: ignore[operator]
    took = time.perf_counter() - started
    print(f"{what:<62} {took * 1000:10.1f} ms   ({result})")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description="the cost of verifying before signing a checkpoint")
    parser.add_argument("-n", type=int, default=50_000, help="decided requests in the store (default 50,000)")
    parser.add_argument("--batch", type=int, default=100, help="requests decided between two checkpoints (100)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(str(Path(tmp) / "bench.db"))
        signer, _ = load_or_create_signing_key(Path(tmp) / "key.pem")
        fill(store, signer, 0, args.n)
        writer = CheckpointWriter(store, signer, Path(tmp) / "audit-checkpoint.txt")
        rows = store.audit_head()[0]
        print(f"store: {args.n} decided requests, {rows} audit rows (SQLite)")
        _timed("first checkpoint (verifies every row: no previous one)", writer.write)
        _timed(
            "audit verify --public-key (the whole chain and every table)",
            lambda: store.verify_audit(trust_key=signer.trust_key).ok,
        )
        fill(store, signer, args.n, args.batch, writer)
        added = store.audit_head()[0] - rows
        _timed(f"next checkpoint ({added} rows and {args.batch // 10} signed decisions since)", writer.write)
        assert not writer.refused, writer.refused


if __name__ == "__main__":
    main()
