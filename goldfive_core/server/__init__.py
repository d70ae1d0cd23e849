"""``goldfive serve``: the approver's front door — HTTP API, live event stream, logins, signed decisions.

Needs ``pip install 'goldfive[server]'`` (Starlette, uvicorn, cryptography); ``import goldfive_core``
never imports this package.

::

    from goldfive_core.server import ServerConfig, create_app
    from goldfive_core.signing import load_or_create_signing_key
    from goldfive_core.store import open_store

    signer, _ = load_or_create_signing_key("~/.config/goldfive/decision-key.pem")
    app = create_app(open_store("goldfive.db"), ServerConfig(signer=signer))
"""

from __future__ import annotations

from ..errors import MissingExtraError

try:
    import cryptography  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError(f"goldfive serve ({exc.name} is missing)", "server") from exc

from .app import MAX_BODY_BYTES, ApiError, ServerConfig, create_app
from .auth import Authenticator, AuthError, User
from .run import DEFAULT_KEY_PATH, serve

__all__ = [
    "DEFAULT_KEY_PATH",
    "MAX_BODY_BYTES",
    "ApiError",
    "AuthError",
    "Authenticator",
    "ServerConfig",
    "User",
    "create_app",
    "serve",
]
