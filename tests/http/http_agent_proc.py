"""An agent process that reaches goldfive serve over HTTP only (run as a subprocess by the restart test).

``python http_agent_proc.py URL TOKEN CALL_ID MARKER [hang]``: one callable run whose guarded tool call
``CALL_ID`` appends its arguments to MARKER when it runs; prints one JSON line with the outcome. The line the body
writes also says how many ``/executing`` claims this process had posted; with ``hang`` the body never ends (a test
kills the process while it runs).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel


async def main() -> None:
    url, token, call_id, marker = sys.argv[1:5]
    hang = sys.argv[5:6] == ["hang"]
    channel = HttpChannel(url, token=token)
    posted: list[str] = []
    request = channel.remote.request

    def counted(method: str, path: str, body: Any = None) -> Any:
        posted.append(f"{method} {path}")
        return request(method, path, body)

    channel.remote.request = counted  # type: ignore[method-assign]

    def append(line: str) -> None:
        with Path(marker).open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    async def body(call_args: Any) -> dict[str, Any]:
        claims = sum(p.endswith("/executing") for p in posted)
        await asyncio.to_thread(append, json.dumps({**call_args, "executing_posts": claims}, sort_keys=True))
        if hang:
            await asyncio.Event().wait()
        return {"sent": call_args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> GuardedResult:
        return await run_approved(
            tools.session,
            channel.store,
            call_id=call_id,
            tool_name="send_money",
            args={"to": "bob", "amount": 10},
            body=body,
            timeout_ms=120_000,
            ledger=channel.ledger,
        )

    result = await wrap(agent, control=channel, sinks=[channel.sink]).run("go")
    await channel.aclose()
    out = result.output
    sys.stdout.write(json.dumps({"status": out.status, "result": out.result, "detail": out.detail}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
