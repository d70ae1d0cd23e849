"""The users and web sessions of a SQL store (``goldfive serve``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..._util import new_id, now_ms
from .._schema import (
    USER_COLS,
    user_row,
)
from ..base import (
    UserRow,
    WebSession,
)
from .db import SqlRole

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

ACCESS_VERSION = "access_version"
"""The ``gf_meta`` key whose value changes with every change of a user's access (open streams re-check then)."""


class SqlUsers(SqlRole):
    """People who log in, their failed logins, and their browsers' sessions."""

    # -- users and web sessions ---------------------------------------------------------------------
    def add_user(self, user: UserRow) -> bool:
        """Create a user; False when the name is taken."""
        with self.db.guard(f"adding user {user.name!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                cur = self.db.execute(
                    conn,
                    f"INSERT INTO gf_users ({USER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    (
                        user.name,
                        user.role,
                        user.token_id,
                        user.token_hash,
                        int(user.disabled),
                        user.created_at_ms,
                        user.updated_at_ms,
                        ",".join(sorted(set(user.groups))),
                    ),
                )
                return bool(cur.rowcount == 1)

    def user(self, name: str) -> UserRow | None:
        """The user called ``name``."""
        with self.db.guard(f"reading user {name!r}"):
            row = self.db.execute(
                self.db.conn(), f"SELECT {USER_COLS} FROM gf_users WHERE name = ?", (name,)
            ).fetchone()
            return user_row(row) if row is not None else None

    def user_by_token_id(self, token_id: str) -> UserRow | None:
        """The user whose current token has this id."""
        with self.db.guard("looking up a token"):
            row = self.db.execute(
                self.db.conn(), f"SELECT {USER_COLS} FROM gf_users WHERE token_id = ?", (token_id,)
            ).fetchone()
            return user_row(row) if row is not None else None

    def users_by_token_ids(self, token_ids: Sequence[str]) -> dict[str, UserRow]:
        """The users whose current tokens have these ids, by token id (one query per 500 ids; an unknown id is
        absent): ``goldfive serve`` re-checks every open stream's token in one look."""
        ids = list(dict.fromkeys(token_ids))
        found: dict[str, UserRow] = {}
        with self.db.guard("looking up tokens"):
            conn = self.db.conn()
            for start in range(0, len(ids), 500):
                page = ids[start : start + 500]
                rows = self.db.execute(
                    conn, f"SELECT {USER_COLS} FROM gf_users WHERE token_id IN ({', '.join('?' * len(page))})", page
                ).fetchall()
                for row in rows:
                    user = user_row(row)
                    found[user.token_id] = user
        return found

    def users(self) -> list[UserRow]:
        """Every user, by name."""
        with self.db.guard("listing users"):
            cur = self.db.execute(self.db.conn(), f"SELECT {USER_COLS} FROM gf_users ORDER BY name")
            return [user_row(r) for r in cur.fetchall()]

    def change_user_groups(
        self, name: str, change: Callable[[tuple[str, ...]], tuple[str, ...]]
    ) -> tuple[str, ...] | None:
        """A user's policy groups replaced by ``change(current)`` in one transaction; None when unknown."""
        with self.db.guard(f"changing user {name!r}'s groups"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                row = self.db.execute(
                    conn, f"SELECT policy_groups FROM gf_users WHERE name = ?{self.db.for_update}", (name,)
                ).fetchone()
                if row is None:
                    return None
                groups = change(tuple(g for g in str(row[0] or "").split(",") if g))
                self.db.execute(
                    conn,
                    "UPDATE gf_users SET policy_groups = ?, updated_at_ms = ? WHERE name = ?",
                    (",".join(sorted(set(groups))), now_ms(), name),
                )
                return tuple(sorted(set(groups)))

    def update_user(
        self,
        name: str,
        *,
        disabled: bool | None = None,
        token_id: str | None = None,
        token_hash: str | None = None,
        role: str | None = None,
        groups: tuple[str, ...] | None = None,
    ) -> bool:
        """Change a user; a new token or disabling ends their web sessions. False when unknown."""
        sets = ["updated_at_ms = ?"]
        params: list[Any] = [now_ms()]
        for column, value in (("disabled", disabled), ("token_id", token_id), ("token_hash", token_hash)):
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(int(value) if isinstance(value, bool) else value)
        if role is not None:
            sets.append("role = ?")
            params.append(role)
        if groups is not None:
            sets.append("policy_groups = ?")
            params.append(",".join(sorted(set(groups))))
        with self.db.guard(f"updating user {name!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                cur = self.db.execute(conn, f"UPDATE gf_users SET {', '.join(sets)} WHERE name = ?", (*params, name))
                if cur.rowcount != 1:
                    return False
                if disabled or token_hash is not None:
                    self.db.execute(conn, "DELETE FROM gf_web_sessions WHERE user_name = ?", (name,))
                self._access_changed(conn)
                return True

    def note_login(self, name: str, *, ok: bool, lock_until_ms: int = 0) -> int:
        """Count a failed login (returns the new count) or reset the count after a good one."""
        with self.db.guard(f"recording a login of {name!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                if ok:
                    self.db.execute(
                        conn, "UPDATE gf_users SET failed_logins = 0, locked_until_ms = 0 WHERE name = ?", (name,)
                    )
                    return 0
                self.db.execute(
                    conn,
                    "UPDATE gf_users SET failed_logins = failed_logins + 1, locked_until_ms = ? WHERE name = ?",
                    (lock_until_ms, name),
                )
                row = self.db.execute(conn, "SELECT failed_logins FROM gf_users WHERE name = ?", (name,)).fetchone()
                return int(row[0]) if row is not None else 0

    def add_web_session(self, session: WebSession) -> None:
        """Store a new web session (and drop expired ones)."""
        with self.db.guard("storing a web session"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                self.db.execute(conn, "DELETE FROM gf_web_sessions WHERE expires_at_ms < ?", (now_ms(),))
                self.db.execute(
                    conn,
                    "INSERT INTO gf_web_sessions (id_hash, user_name, csrf, created_at_ms, expires_at_ms) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session.id_hash, session.user_name, session.csrf, session.created_at_ms, session.expires_at_ms),
                )

    def web_session(self, id_hash: str) -> WebSession | None:
        """A web session that has not expired."""
        with self.db.guard("reading a web session"):
            row = self.db.execute(
                self.db.conn(),
                "SELECT id_hash, user_name, csrf, created_at_ms, expires_at_ms FROM gf_web_sessions "
                "WHERE id_hash = ? AND expires_at_ms > ?",
                (id_hash, now_ms()),
            ).fetchone()
        if row is None:
            return None
        return WebSession(id_hash=row[0], user_name=row[1], csrf=row[2], created_at_ms=row[3], expires_at_ms=row[4])

    def end_web_session(self, id_hash: str) -> None:
        """Log a web session out."""
        with self.db.guard("ending a web session"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                self.db.execute(conn, "DELETE FROM gf_web_sessions WHERE id_hash = ?", (id_hash,))
                self._access_changed(conn)

    def _access_changed(self, conn: Any) -> None:
        """In the change's own transaction: a new :meth:`access_version`, and news for every ``serve`` over the
        store, whose open streams re-check their credentials at once (PostgreSQL: NOTIFY; SQLite: the commit)."""
        self.db.execute(
            conn,
            "INSERT INTO gf_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (ACCESS_VERSION, new_id("access")),
        )
        self.db.notify(conn, "access", "")

    def access_version(self) -> str:
        """Changes with every user update and logout (see :meth:`_access_changed`); "" before the first."""
        with self.db.guard("reading the access version"):
            row = self.db.execute(
                self.db.conn(), "SELECT value FROM gf_meta WHERE key = ?", (ACCESS_VERSION,)
            ).fetchone()
        return str(row[0]) if row is not None else ""
