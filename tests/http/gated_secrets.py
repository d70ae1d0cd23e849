"""Run a Python module whose server never finishes a token's scrypt check: ``gated_secrets.py -m module ...``.

Stands in for a ``goldfive serve`` whose secret checks are all busy (a connect storm: hundreds of agents' first
checks queued ahead): every check it starts waits, for as long as the process lives. What such a server still
serves is what it can take without one.
"""

from __future__ import annotations

import runpy
import sys
import threading

import goldfive_core.server.auth as auth

_never = threading.Event()


def _busy(secret: str, stored: str) -> bool:
    _never.wait()
    return False


auth.verify_token = _busy  # looked up by name at each check
assert sys.argv[1] == "-m"
module = sys.argv[2]
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
