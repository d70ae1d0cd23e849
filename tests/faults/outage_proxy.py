"""A TCP relay in front of the shared PostgreSQL that a test can take down and bring back.

What an agent sees when its database restarts: every open connection is cut, and new connections
are refused until the server is back. The shared test server must not be restarted (other people's
tests use it), so the outage is made here, between the agent and the server: :meth:`down` closes
every relayed connection and refuses new ones, :meth:`up` accepts them again. The decider in a test
talks to the server directly and is not affected.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class OutageProxy:
    """Relays 127.0.0.1:<port> to ``target`` (host, port) until :meth:`close`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._down = False
        self._closed = False
        self.cut = 0
        """How many relayed connections :meth:`down` has cut so far."""
        self.refused = 0
        """How many connection attempts were refused while down."""
        threading.Thread(target=self._accept, name="outage-proxy", daemon=True).start()

    @classmethod
    def for_dsn(cls, dsn: str) -> tuple[OutageProxy, str]:
        """A proxy in front of ``dsn``'s server and the DSN that goes through it."""
        parts = urlsplit(dsn)
        proxy = cls((parts.hostname or "127.0.0.1", parts.port or 5432))
        auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return proxy, urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))

    def down(self) -> int:
        """Cut every relayed connection and refuse new ones; returns how many were cut."""
        with self._lock:
            self._down = True
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()
        self.cut += len(pairs)
        return len(pairs)

    def up(self) -> None:
        """Accept connections again (the server is back)."""
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        self.down()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                self.refused += 1
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _relay(self, a: socket.socket, b: socket.socket) -> None:
        peer = {a: b, b: a}
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 1.0)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peer[s].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock, contextlib.suppress(ValueError):
                self._pairs.remove((a, b))
