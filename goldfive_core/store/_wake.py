"""Wake-ups for SQLite waiters: a directory of Unix datagram sockets beside the database.

SQLite cannot tell another connection that something was committed, so waiters
used to poll. Instead, every process that waits (an agent for its inbox, the
command line for an ack, ``goldfive serve``'s hub) binds a Unix datagram socket
in ``<database>.wake/`` for the length of the wait, and every process that
commits a write sends a one-byte datagram to each socket there. A waiter blocks
on its socket and looks at the database when poked — or, as a fallback, after a
slow poll interval — so a lost poke costs latency, never a message.

* The directory is created 0700 (the database itself is 0600): a directory that
  is not a private directory of this user is not used (logged once; polling).
* Sockets are named ``<pid>-<8 hex digits>`` and live only during a wait; a
  socket left by a killed process refuses datagrams (``ECONNREFUSED``) and the
  next writer removes it (once no process has its pid). Pokes are non-blocking; a full queue means the
  waiter is already poked. At most :data:`MAX_WAITERS` sockets are poked.
* Socket paths are limited to about 100 bytes; a longer path is reached through
  ``/proc/self/fd/<fd of the directory>/`` (Linux). Where Unix sockets are
  unavailable, or anything else about the wake path fails, that is logged once
  and waiters poll as before.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import secrets
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MAX_WAITERS", "WakeDir", "Waiter"]

logger = logging.getLogger(__name__)

MAX_WAITERS = 1024
"""At most this many sockets are poked per commit (more waiters than this on one database fall back to polling)."""

_NAME = re.compile(r"[0-9]{1,10}-[0-9a-f]{8}")
_SUN_PATH_MAX = 100
"""Portable bound for a socket path (Linux allows 107 bytes, macOS 103)."""
_PROC_FD = "/proc/self/fd"


class Waiter:
    """One bound socket in the wake directory, for one wait; :meth:`close` removes it."""

    fallback_s: float = 1.0
    """How long an event loop sleeping on this socket waits before looking anyway (a lost poke's cost)."""

    def __init__(self, sock: socket.socket, name: str, dir_fd: int | None, owner: WakeDir) -> None:
        self._sock = sock
        self._name = name
        self._dir_fd = dir_fd
        self._owner = owner

    def wait(self, timeout_s: float) -> bool:
        """Block until poked (True) or ``timeout_s`` passed (False); drains every poke queued so far.

        Never raises: a socket error is logged once and the wait becomes a plain sleep (a poll).
        """
        timeout_s = max(timeout_s, 0.0)
        try:
            self._sock.settimeout(timeout_s or None)
            if timeout_s:
                self._sock.recv(16)
            else:
                self._sock.recv(16, socket.MSG_DONTWAIT)
        except (TimeoutError, BlockingIOError):
            return False
        except OSError as exc:
            self._owner._log_once("recv", "cannot wait on a socket: %s", exc)
            time.sleep(timeout_s)
            return False
        self.drain()
        return True

    def fileno(self) -> int:
        """The socket's descriptor: readable when poked (an event loop can watch it)."""
        return self._sock.fileno()

    def drain(self) -> bool:
        """Consume every poke queued so far without blocking; whether there was one."""
        self._sock.setblocking(False)
        poked = False
        with contextlib.suppress(OSError):
            for _ in range(64):  # the kernel queues only a few datagrams per socket
                self._sock.recv(16)
                poked = True
        return poked

    def gone(self) -> bool:
        """Whether this socket's name was removed from the directory (writers cannot find it any more)."""
        try:
            if self._dir_fd is not None:
                os.stat(self._name, dir_fd=self._dir_fd, follow_symlinks=False)
            else:
                os.lstat(self._owner.path / self._name)
        except OSError:
            return True
        return False

    def close(self) -> None:
        self._sock.close()
        with contextlib.suppress(OSError):
            if self._dir_fd is not None:
                os.unlink(self._name, dir_fd=self._dir_fd)
            else:
                os.unlink(self._owner.path / self._name)
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None


class WakeDir:
    """The wake directory of one database: waiters bind in it, writers :meth:`poke` it."""

    def __init__(self, db_path: str | Path) -> None:
        self.path = Path(os.path.abspath(db_path) + ".wake")
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self._checked: tuple[int, int] | None = None

    def _log_once(self, key: str, message: str, *args: object) -> None:
        with self._lock:
            if key in self._logged:
                return
            self._logged.add(key)
        logger.warning("goldfive store wake-ups (%s): " + message + "; waiting agents poll instead", self.path, *args)

    def _private(self) -> bool:
        """Whether the directory is a real directory of this user that nobody else may enter."""
        try:
            st = os.lstat(self.path)
        except OSError as exc:
            self._log_once("stat", "cannot look at the directory: %s", exc)
            return False
        identity = (st.st_dev, st.st_ino)
        if identity == self._checked:
            return True
        uid = os.geteuid() if hasattr(os, "geteuid") else st.st_uid
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
            self._log_once(
                "private",
                "not a private directory of this user (mode %o, owner %d); remove it to let goldfive recreate it",
                stat.S_IMODE(st.st_mode),
                st.st_uid,
            )
            return False
        self._checked = identity
        return True

    def _address(self, name: str) -> tuple[str, int | None]:
        """The address of socket ``name`` (and a directory fd the caller closes, for a long path)."""
        full = str(self.path / name)
        if len(os.fsencode(full)) <= _SUN_PATH_MAX:
            return full, None
        fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        return f"{_PROC_FD}/{fd}/{name}", fd

    @contextlib.contextmanager
    def waiter(self) -> Iterator[Waiter | None]:
        """A bound socket for one wait, or None when wake-ups are unavailable (logged once)."""
        made = self.bind()
        try:
            yield made
        finally:
            if made is not None:
                made.close()

    def bind(self) -> Waiter | None:
        """A bound socket the caller closes, or None when wake-ups are unavailable (logged once)."""
        if not hasattr(socket, "AF_UNIX"):
            self._log_once("af_unix", "this platform has no Unix domain sockets")
            return None
        try:
            os.mkdir(self.path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            self._log_once("mkdir", "cannot create the directory: %s", exc)
            return None
        if not self._private():
            return None
        for _ in range(3):
            name = f"{os.getpid()}-{secrets.token_hex(4)}"
            dir_fd: int | None = None
            sock: socket.socket | None = None
            try:
                address, dir_fd = self._address(name)
                if dir_fd is not None and not os.path.isdir(f"{_PROC_FD}/{dir_fd}"):
                    raise OSError(errno.ENAMETOOLONG, "socket path too long and no /proc/self/fd")
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.bind(address)
                return Waiter(sock, name, dir_fd, self)
            except OSError as exc:
                if sock is not None:
                    sock.close()
                if dir_fd is not None:
                    os.close(dir_fd)
                if exc.errno == errno.EADDRINUSE:
                    continue
                self._log_once("bind", "cannot bind a socket: %s", exc)
                return None
        return None

    def poke(self) -> int:
        """Send one byte to every waiter's socket (after a commit); returns how many were poked.

        Never raises and never blocks: a missing directory means nobody waits; a socket whose owner
        is gone is removed; any other failure is logged once (waiters then find the news by polling).
        """
        try:
            with os.scandir(self.path) as entries:
                names = [e.name for _, e in zip(range(MAX_WAITERS + 1), entries, strict=False)]
        except FileNotFoundError:
            return 0
        except OSError as exc:
            self._log_once("list", "cannot list the directory: %s", exc)
            return 0
        names = [n for n in names if _NAME.fullmatch(n)]
        if not names:
            return 0
        if len(names) > MAX_WAITERS:
            self._log_once("many", "more than %d waiters; only %d are poked", MAX_WAITERS, MAX_WAITERS)
            names = names[:MAX_WAITERS]
        poked = 0
        dir_fd: int | None = None
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
                sender.setblocking(False)
                for name in names:
                    full = str(self.path / name)
                    if len(os.fsencode(full)) > _SUN_PATH_MAX:
                        if dir_fd is None:
                            dir_fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
                        full = f"{_PROC_FD}/{dir_fd}/{name}"
                    try:
                        sender.sendto(b"\1", full)
                        poked += 1
                    except BlockingIOError:  # its queue is full: it is poked already
                        poked += 1
                    except ConnectionRefusedError:  # nobody bound: left by a process that is gone
                        self._remove_stale(name)
                    except FileNotFoundError:  # the wait ended meanwhile
                        pass
                    except OSError as exc:
                        self._log_once("send", "cannot poke %s: %s", name, exc)
        except OSError as exc:
            self._log_once("sender", "cannot make a socket: %s", exc)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
        return poked

    def _remove_stale(self, name: str) -> None:
        """Remove a socket nobody is bound to, once its process is gone (a socket being bound right now
        also refuses, for a moment: its process is alive, so it stays)."""
        if _alive(int(name.split("-", 1)[0])):
            return
        path = self.path / name
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True
