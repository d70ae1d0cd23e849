"""Agents that reach goldfive over HTTP: :class:`HttpChannel` talks to ``goldfive serve`` with an agent token.

Needs ``pip install 'goldfive[http]'`` (httpx only: no database driver, no database credentials on the
agent's host). ``import goldfive_core`` never imports this package.

::

    from goldfive_core import wrap
    from goldfive_core.store.http import HttpChannel

    channel = HttpChannel("https://goldfive.internal", token=os.environ["GOLDFIVE_AGENT_TOKEN"])
    result = await wrap(agent, control=channel, sinks=[channel.sink]).run("go")
    await channel.aclose()
"""

from __future__ import annotations

from ...errors import MissingExtraError

try:
    import httpx  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError(f"goldfive_core.store.http (HttpChannel; {exc.name} is missing)", "http") from exc

from ._channel import DEFAULT_UNREACHABLE_AFTER_S, HttpChannel, HttpLedger
from ._remote import AgentRefused, RemoteStore

__all__ = ["DEFAULT_UNREACHABLE_AFTER_S", "AgentRefused", "HttpChannel", "HttpLedger", "RemoteStore"]
