"""Attempt limits: a token bucket per key (a token id and a client address), checked before any slow work.

A key may fail ``burst`` times at once; after that one more attempt is allowed every ``refill_s`` seconds.
An attempt is *taken* before the work it guards (so concurrent requests cannot all slip through the same
last place) and *given back* when it turned out not to be a failure. The table holds at most ``max_keys``
keys (least recently failed dropped first): bounded memory under a spray of addresses.
"""

from __future__ import annotations

import collections
import dataclasses
import ipaddress
import math
import time
from collections.abc import Callable

__all__ = ["AttemptLimiter", "client_key"]


def client_key(host: str | None) -> str:
    """The address a limit is kept for: an IPv4 address as is, an IPv6 address by its /64 network (one
    host usually holds a whole /64); anything unparsable (a test client, a UNIX socket) as given."""
    if not host:
        return "?"
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if isinstance(addr, ipaddress.IPv6Address):
        mapped = addr.ipv4_mapped
        return str(mapped) if mapped is not None else str(ipaddress.ip_network(f"{addr}/64", strict=False))
    return str(addr)


@dataclasses.dataclass
class _Bucket:
    places: float
    at: float


class AttemptLimiter:
    """Token buckets of failed attempts, one per key, bounded in number."""

    def __init__(
        self, *, burst: int, refill_s: float, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.burst = burst
        self.refill_s = refill_s
        self.max_keys = max_keys
        self._clock = clock
        self._buckets: collections.OrderedDict[str, _Bucket] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, key: str, now: float) -> _Bucket | None:
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.places = min(float(self.burst), bucket.places + (now - bucket.at) / self.refill_s)
            bucket.at = now
        return bucket

    def _seconds(self, bucket: _Bucket | None) -> int:
        if bucket is None or bucket.places >= 1.0:
            return 0
        return max(1, math.ceil((1.0 - bucket.places) * self.refill_s))

    def wait(self, key: str) -> int:
        """The whole seconds until ``key`` may try again (0: now); takes nothing."""
        return self._seconds(self._refilled(key, self._clock()))

    def take(self, key: str) -> int:
        """Take one attempt for ``key``: 0 when it may go ahead, else the whole seconds to wait (nothing taken)."""
        now = self._clock()
        bucket = self._refilled(key, now)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
        wait = self._seconds(bucket)
        if wait:
            return wait
        bucket.places -= 1.0
        self._buckets.move_to_end(key)
        return 0

    def give_back(self, key: str) -> None:
        """The attempt taken for ``key`` was not a failure: return its place (a full bucket is forgotten)."""
        bucket = self._refilled(key, self._clock())
        if bucket is None:
            return
        bucket.places = min(float(self.burst), bucket.places + 1.0)
        if bucket.places >= self.burst:
            del self._buckets[key]
