"""A store filled by real runs (the callable adapter, run_approved, decide()) for the audit property tests.

What it holds: approvals approved (one signed, one with edited arguments), rejected, decided by a quorum of
two, approved with a run grant, timed out, and one decided in the store after its run ended; the grant's
policy call, its revocation; an execution done and one in doubt; two runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from store_support import Backend, await_until

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.approvals import Principal
from goldfive_core.policy import parse_policy
from goldfive_core.signing import TrustKey, load_or_create_signing_key
from goldfive_core.store import DecideVerdict, Store, StoreChannel, decide, run_approved
from goldfive_core.store.execution import GuardedResult
from goldfive_core.store.grants import grant_rows, revoke_grant

POLICY = parse_policy(
    """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:ana", "user:bo"]
quorum = 2

[[rule]]
name = "payments to acme"
tool = "transfer_funds"
when = "args.to == 'acme'"
action = "ask"
grants = ["run", "1h"]

[[rule]]
name = "payments to bolt"
tool = "transfer_funds"
when = "args.to == 'bolt'"
action = "ask"
grants = ["1h"]
""",
    source="audit-policy.toml",
)
ANA = Principal(name="ana", channel="cli")
BO = Principal(name="bo", channel="api")  # through goldfive serve: its decisions are always signed

CALLS: tuple[Mapping[str, Any], ...] = (
    {"amount": 5, "to": "x"},  # call-0: approved with an edit, signed
    {"amount": 6, "to": "y"},  # call-1: rejected
    {"amount": 20_000, "to": "z"},  # call-2: a quorum of ana and bo
    {"amount": 7, "to": "acme"},  # call-3: approved with a run grant
    {"amount": 8, "to": "acme"},  # call-4: runs on the grant (no request)
    {"amount": 9, "to": "w"},  # call-5: nobody answers; it times out
    {"amount": 12, "to": "bolt"},  # call-6: approved with a grant for an hour
)


async def _decide(store: Store, target: str, **kwargs: Any) -> None:
    await await_until(lambda: any(r.target_id == target and r.open for r in store.approvals()), what=target)
    result = await asyncio.to_thread(decide, store, target, **kwargs)
    assert result.verdict in (DecideVerdict.APPLIED, DecideVerdict.RECORDED), result.detail


def orphan_run(store: Store) -> str:
    return store.approvals_for("orphan-1")[0].run_id


async def populate(backend: Backend, tmp_path: Path) -> tuple[Store, TrustKey]:
    store = backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "decision-key.pem")
    channel = StoreChannel(backend.open(), sweep_interval_s=0.2)
    results: list[GuardedResult] = []

    async def body(args: Mapping[str, Any]) -> str:
        return f"sent {args['amount']}"

    async def agent(task: Task, tools: AgentTools) -> None:
        for i, args in enumerate(CALLS):
            results.append(
                await run_approved(
                    tools.session,
                    channel.store,
                    call_id=f"call-{i}",
                    tool_name="transfer_funds",
                    args=args,
                    body=body,
                    timeout_ms=300 if i == 5 else 60_000,
                )
            )

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink], policy=POLICY).run("pay"))
    try:
        await _decide(store, "call-0", approve=True, principal=ANA, edited_args={"amount": 3, "to": "x"}, signer=signer)
        await _decide(store, "call-1", approve=False, principal=BO, signer=signer, reason="not today")
        await _decide(store, "call-2", approve=True, principal=ANA, signer=signer, reason="fine by me")
        await await_until(lambda: store.approvals_for("call-2")[0].quorum_progress, what="the first vote")
        await _decide(store, "call-2", approve=True, principal=BO, signer=signer, reason="ok")
        await _decide(store, "call-3", approve=True, principal=ANA, grant="run")
        await _decide(store, "call-6", approve=True, principal=BO, signer=signer, grant="1h")
        await asyncio.wait_for(run, 60)
    finally:
        if not run.done():
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await run
        await asyncio.to_thread(channel.sink.flush)
        await channel.aclose()
    assert [r.status for r in results] == ["ran", "reject", "ran", "ran", "ran", "timeout", "ran"], results

    # A second run asks and ends before anyone answers: its decision is recorded in the store.
    orphan_channel = StoreChannel(backend.open(), sweep_interval_s=0.2)

    async def asker(task: Task, tools: AgentTools) -> None:
        await run_approved(
            tools.session,
            orphan_channel.store,
            call_id="orphan-1",
            tool_name="transfer_funds",
            args={"amount": 11, "to": "v"},
            body=body,
            timeout_ms=60_000,
        )

    second = asyncio.create_task(wrap(asker, control=orphan_channel, sinks=[orphan_channel.sink]).run("ask"))
    await await_until(lambda: store.approvals_for("orphan-1"), what="the orphan's request")
    # Its process dies: the channel stops (no more heartbeats, nothing more written), then the run.
    await orphan_channel.aclose()
    second.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await second
    judge = backend.open()
    judge.stale_after_ms = 300  # type: ignore[attr-defined]  # deems the run gone after 0.3 s without a heartbeat
    await await_until(lambda: judge.liveness(judge.run(orphan_run(store))) != "live", what="the run to look gone")
    await _decide(judge, "orphan-1", approve=True, principal=BO, signer=signer, reason="fine")
    judge.reap_crashed()  # and the store closes the crashed run

    run_grant = next(g for g in grant_rows(store) if g.scope == "run")
    revoke_grant(store, run_grant.grant_id, by="bo", reason="enough for today", channel="cli")
    orphan = store.approvals_for("orphan-1")[0]
    assert store.mark_executing("doubt-1", run_id=orphan.run_id, pid=1, host="h", args_digest="sha256:d")  # in doubt
    report = store.verify_audit(trust_key=signer.trust_key)
    assert report.ok, report.problems
    assert store.approvals_for("call-0")[0].decision_sig  # signed
    assert store.approvals_for("call-2")[0].decision_sig  # a quorum's last vote, signed
    return store, signer.trust_key
