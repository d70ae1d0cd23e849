"""``goldfive review stats --url``: the reviewer tier's record read through ``goldfive serve``
(``GET /api/review/stats``), each verdict checked against the server's own ``--policy``, not a file the caller
names. The same JSON as ``goldfive review stats`` against the database."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from server_support import goldfive, serve_process
from store_support import Backend
from test_store_review import reviewed
from test_store_trust import Agent

from goldfive_core.review import ReviewVerdict
from goldfive_core.testing import ScriptedVerdicts

STRICT = '[[rule]]\nname = "transfers"\ntool = "transfer"\naction = "ask"\nreview = "acme.review:strict"\n'


async def test_review_stats_through_serve_are_checked_against_the_servers_own_policy(
    backend: Backend, tmp_path: Path
) -> None:
    agent = Agent(
        backend, "pay-r", trust=None, policy=reviewed(ScriptedVerdicts([ReviewVerdict.ask("hmm")], name="payments"))
    )
    try:
        await agent.pending()
        local = goldfive(backend, "review", "stats", "--json")
        assert local.returncode == 0, local.stderr
        policy_file = tmp_path / "server-policy.toml"
        policy_file.write_text(STRICT)
        with serve_process(backend, tmp_path / "key.pem", "--policy", str(policy_file)) as served:
            remote = ("--url", served.url, "--token", served.admin_token)
            answered = await asyncio.to_thread(goldfive, backend, "review", "stats", *remote, "--json")
            assert answered.returncode == 0, answered.stderr
            stats = json.loads(answered.stdout)
            assert stats["checked_against_server_policy"] is True
            assert stats["total"] == 1 and stats["by_verdict"]["ask"]["undecided"] == 1
            [unverified] = stats["unverified"]
            assert (unverified["call_id"], unverified["reviewer"], unverified["verified"]) == (
                "pay-r",
                "reviewer:payments",
                False,
            )
            # The counts are the database's own; only the check against the server's policy is added.
            mine = json.loads(local.stdout)
            assert {k: stats[k] for k in ("total", "by_verdict", "by_rule", "by_reviewer")} == {
                k: mine[k] for k in ("total", "by_verdict", "by_rule", "by_reviewer")
            }
            text = await asyncio.to_thread(goldfive, backend, "review", "stats", *remote, "--rule", "transfers")
            assert "1 reviewer verdicts" in text.stdout and "NOT VERIFIED against the policy (1):" in text.stdout
            none = await asyncio.to_thread(goldfive, backend, "review", "stats", *remote, "--reviewer", "nobody")
            assert none.returncode == 0 and none.stdout.startswith("no reviewer verdicts recorded")
            theirs = await asyncio.to_thread(
                goldfive, backend, "review", "stats", *remote, "--policy", str(policy_file)
            )
            assert theirs.returncode == 2 and "checks against its own serve --policy" in theirs.stderr
    finally:
        await agent.close()
