"""Junk never reaches a 500: a seeded fuzz of every route of ``goldfive serve`` over a real socket.

The route list comes from the app's route table; each request is junk in one or more ways (see
fuzz_support). Every answer must be below 500 and, for a 4xx, say what is wrong; the server's log
must hold no traceback; the server must still serve afterwards. bench/fuzz_api.py runs 10,000.
"""

from __future__ import annotations

from pathlib import Path

from fuzz_support import Answer, fuzz, http_head, live_server, log_in, routes_of, seed, send_raw
from store_support import Backend

REQUESTS = 2000
SEED = 27


async def _me(port: int, token: str) -> Answer:
    return await send_raw(
        port, http_head("GET", "/api/me", [("Authorization", f"Bearer {token}".encode())], length=None)
    )


async def test_every_route_answers_junk_below_500_and_nothing_logs_a_traceback(
    backend: Backend, tmp_path: Path
) -> None:
    with live_server(backend.open(), tmp_path) as live:
        seeds = seed(live)
        await log_in(live, seeds)
        report = await fuzz(live, seeds, requests=REQUESTS, seed_value=SEED)

        assert report.failures == [], "\n".join(report.failures[:20])
        assert report.server_errors == 0, report.summary()
        assert report.tracebacks == [], "\n".join(report.tracebacks[:20])
        assert report.requests == REQUESTS and report.disconnects > 0, report.summary()
        every = {f"{method} {path}" for method, path in routes_of(live.app)}
        missed = {route for route in every if report.per_route[route] < 5}
        assert not missed, f"routes the fuzz hardly reached: {sorted(missed)}"
        assert report.by_class.get("4xx", 0) > REQUESTS // 2  # junk is refused, not accepted
        assert (await _me(live.port, live.tokens["ana"])).status == 200  # and the server still serves
