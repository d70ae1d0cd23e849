"""``goldfive mcp --dsn``: the gateway on a PostgreSQL store, a person deciding with ``goldfive --dsn approve``.

The gateway and the ``goldfive`` command are separate processes on one real PostgreSQL (GOLDFIVE_TEST_PG_DSN), in
a schema of the test's own (``postgres_backend``, tests/store/conftest.py: skipped without the DSN, a failure
where PostgreSQL is expected but unreachable). The client is the MCP SDK's over stdio, the upstream the demo bank.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from mcp_support import ROOT, gateway, text

sys.path.insert(0, str(ROOT / "tests" / "store"))

from store_support import Backend

TRANSFER = {"amount": 120, "to": "ACME"}


async def test_a_gated_call_on_postgres_waits_is_approved_from_the_cli_and_runs_once(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    assert postgres_backend.schema is not None
    store = ("--dsn", postgres_backend.location, "--schema", postgres_backend.schema)
    async with gateway(tmp_path, "--gate", "transfer_funds", "--default", "allow", store=store) as gw:
        assert gw.store == store and not gw.db.exists()  # no SQLite file: the store is PostgreSQL's
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        assert request["tool_name"] == "transfer_funds" and request["args"] == TRANSFER
        assert gw.upstream_calls() == [] and not call.done()  # the call waits for the person
        approved = await gw.goldfive("approve", request["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        result = await asyncio.wait_for(call, 30)
        again = await gw.goldfive("approve", request["target_id"], "--by", "bo")
        assert again.returncode != 0  # decided once: nothing left to approve
        shown = await gw.goldfive("show", request["target_id"], "--json")
    assert not result.is_error and "sent 120.00 EUR to ACME" in text(result)
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {**TRANSFER, "currency": "EUR"}}]
    record = json.loads(shown.stdout)
    decided = {k: record[k] for k in ("state", "decision", "decided_by", "execution")}
    assert decided == {"state": "decided", "decision": "approve", "decided_by": "ana", "execution": "done"}, record
    assert not gw.db.exists()
