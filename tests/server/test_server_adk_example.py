"""The bundled ADK example (a real agent process, scripted model) answered over HTTP, trusting only the server's key."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from server_support import Server, eventually
from store_support import REPO

EXAMPLE = REPO / "examples" / "adk_approval.py"


def _start_example(srv: Server, tmp_path: Path) -> subprocess.Popen[str]:
    env = srv.backend.env()
    env["GOLDFIVE_TRUST_KEY"] = srv.signer.trust_key.text()
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--wait", "--db", srv.backend.location, "--timeout-ms", "60000"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


async def test_the_adk_example_is_approved_over_http_with_edited_args_and_refuses_a_local_cli_approval(
    sqlite_server: Server, tmp_path: Path
) -> None:
    srv = sqlite_server
    agent = _start_example(srv, tmp_path)
    try:
        card = await _first_card(srv)
        assert card["tool_name"] == "transfer_funds" and card["args"] == {"amount": 250, "to": "ACME Corp"}
        assert card["agent"] == "treasurer"
        # The local command line writes straight into the store without the key: refused, still pending.
        forged = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "goldfive_core.cli", "approve", card["target_id"], "--by", "cfo@example.com"],
            env=srv.backend.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO,
        )
        assert forged.returncode == 1 and "not signed" in forged.stdout + forged.stderr
        assert (await srv.get(f"/api/approvals/{card['target_id']}")).json()["state"] == "pending"
        resp = await srv.post(
            f"/api/approvals/{card['target_id']}/approve",
            {"args_digest": card["args_digest"], "edited_args": {"amount": 120, "to": "ACME Ltd"}},
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["result"] == "SUCCESS"
        out, err = await asyncio.to_thread(agent.communicate, timeout=60)
        assert agent.returncode == 0, err
        assert "Done: sent 120 EUR to ACME Ltd." in out
        assert "ledger: [{'amount': 120, 'to': 'ACME Ltd'}]" in out
        rows = srv.store.audit_rows(run_id=card["run_id"])
        refused = [r.event().decision_refused for r in rows if r.kind == "decision_refused"]
        assert [r.decided_by for r in refused] == ["cfo@example.com"]
        granted = [r.event().approval_granted for r in rows if r.kind == "approval_granted"]
        assert [(g.decided_by, g.channel) for g in granted] == [("ana", "api")]
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()


async def _first_card(srv: Server) -> dict[str, object]:
    async def look() -> dict[str, object] | None:
        items = (await srv.get("/api/approvals")).json()["approvals"]
        return items[0] if items else None

    found: dict[str, object] = await eventually(look, "the example's request in the inbox", limit_s=45)
    return found
