"""ADK's own HTTP server (``get_fast_api_app`` + uvicorn on 127.0.0.1) hosting detach_app and a Resumer.

``python server_proc.py PORT SESSIONS_DB``. Prints ``ready`` once it answers HTTP.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import uvicorn
from google.adk.agents.base_agent import BaseAgent
from google.adk.apps import App
from google.adk.cli.fast_api import get_fast_api_app
from google.adk.cli.utils.base_agent_loader import BaseAgentLoader
from google.adk.sessions.sqlite_session_service import SqliteSessionService

sys.path.insert(0, str(Path(__file__).parent))
from detach_app import build_app

from goldfive_adk.detach import Resumed, Resumer


class OneApp(BaseAgentLoader):
    def __init__(self, app: App) -> None:
        self.app = app

    def load_agent(self, agent_name: str) -> BaseAgent | App:
        if agent_name != self.app.name:
            raise ValueError(f"no agent {agent_name!r}")
        return self.app

    def list_agents(self) -> list[str]:
        return [self.app.name]

    def list_agents_detailed(self) -> list[dict[str, Any]]:
        return [{"name": self.app.name}]


class CountingResumer(Resumer):
    """A Resumer that appends a line to ``$DETACH_PASSES/<pid>`` after each pass over the store."""

    async def resume_ready(self) -> list[Resumed]:
        done = await super().resume_ready()
        folder = os.environ.get("DETACH_PASSES")
        if folder:
            with (Path(folder) / str(os.getpid())).open("a", encoding="utf-8") as f:
                f.write(f"{len(done)}\n")
        return done


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    port, sessions_db = int(sys.argv[1]), sys.argv[2]
    app = build_app()
    detaching = any(getattr(p, "detach", None) is not None for p in app.plugins)
    resumer = (
        CountingResumer(app, session_service=SqliteSessionService(db_path=sessions_db), poll_interval_s=0.2)
        if detaching
        else None
    )
    api = get_fast_api_app(
        agents_dir=str(Path(sessions_db).parent),
        agent_loader=OneApp(app),
        session_service_uri=f"sqlite:///{sessions_db}",
        artifact_service_uri="memory://",
        memory_service_uri="memory://",
        use_local_storage=False,
        web=False,
        host="127.0.0.1",
        port=port,
        lifespan=resumer.lifespan if resumer is not None else None,
    )
    uvicorn.run(api, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
