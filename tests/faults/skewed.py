"""Run a Python module with this process's wall clock moved by OFFSET seconds: ``skewed.py OFFSET -m module ...``.

Stands in for a host whose clock is wrong: ``time.time``/``time.time_ns`` (what goldfive reads for
wall-clock time) are shifted; the database's clock is not.
"""

from __future__ import annotations

import runpy
import sys
import time

offset_s = float(sys.argv[1])
_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + offset_s
time.time_ns = lambda: _time_ns() + int(offset_s * 1e9)
assert sys.argv[2] == "-m"
module = sys.argv[3]
sys.argv = [module, *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
