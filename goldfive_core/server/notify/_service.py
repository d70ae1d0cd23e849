"""Notifier: turns the audit log into notices, keeps them in the store's outbox, and delivers them.

One loop per ``goldfive serve`` process: scan the audit log past the shared
cursor, enqueue a notice per matching channel (deduplicated by event id and
channel, so several processes enqueue once), claim due rows under a lease and
deliver them concurrently. A failing channel is retried with backoff and jitter
and finally marked failed; it never holds up another channel or the agent
(agents never wait on notifications: the notifier only reads what they wrote).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import socket
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format

from ..._util import new_id
from ...policy import PolicyAuthority
from ...store.base import Store, StoreError
from ...store.outbox import (
    OutboxItem,
    OutboxRow,
    claim_due,
    defer,
    enqueue,
    fail,
    mark_sent,
    notify_cursor,
    request_row,
    store_now_ms,
)
from ._channels import DeliveryError, HttpPost, deliver, httpx_post
from ._config import NotifyConfig, Target
from ._notice import Notice, as_judged, asked_view, notice_for

__all__ = ["Notifier"]

logger = logging.getLogger(__name__)

SCAN_BATCH = 500
LEASE_MS = 60_000


class Notifier:
    """Scans the audit log into the outbox and delivers due notices (``await notifier.run()``)."""

    def __init__(
        self,
        store: Store,
        config: NotifyConfig,
        *,
        post: HttpPost = httpx_post,
        owner: str | None = None,
        start_at: int | None = None,
        jitter: Callable[[], float] = random.random,
        rules: PolicyAuthority | None = None,
    ) -> None:
        from ...store.sql import SqlStore

        if not isinstance(store, SqlStore):
            raise TypeError(f"notifications need a SQL store (SQLite or PostgreSQL), got {type(store).__name__}")
        self.store: SqlStore = store
        self.config = config
        self._post = post
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{new_id('n')}"
        self._start_at = start_at
        self._jitter = jitter
        self._targets = {t.channel: t for t in config.targets}
        self._rules = rules
        """With a policy (``serve --policy``): notices name its rule for each request and go to who may decide under
        it, never to the approvers the agent wrote."""

    # -- scanning ---------------------------------------------------------------------------
    def scan(self) -> int:
        """Enqueue the notices for audit rows past the cursor; returns how many new rows were enqueued."""
        if not self._targets:
            return 0
        start = self._start_at if self._start_at is not None else self.store.audit_head()[0]
        cursor = notify_cursor(self.store, start_at=start)
        added = 0
        while True:
            rows = self.store.audit_rows(after_seq=cursor, limit=SCAN_BATCH)
            if not rows:
                return added
            items: list[OutboxItem] = []
            for row in rows:
                event = row.event()
                notice = notice_for(event, self.config)
                if notice is not None:
                    items += self._items_for(notice, event, row.seq, batch=items)
            cursor = rows[-1].seq
            added += enqueue(self.store, items, scanned_to=cursor)

    def _items_for(self, notice: Notice, event: Any, seq: int, *, batch: list[OutboxItem]) -> list[OutboxItem]:
        if notice.follow_up:
            notice = self._with_request_facts(notice)
        elif notice.kind == "approval_requested" and (rules := self._judging()) is not None:
            notice = as_judged(notice, asked_view(event), rules)
        event_json = json_format.MessageToDict(event, preserving_proto_field_name=True)
        items = []
        for channel, target in self._targets.items():
            if notice.follow_up:
                # A follow-up answers the request's message: only where the request went.
                in_batch = any(
                    i.kind == "approval_requested"
                    and (i.target_id, i.run_id, i.channel) == (notice.target_id, notice.run_id, channel)
                    for i in batch
                )
                if (
                    not in_batch
                    and request_row(self.store, target_id=notice.target_id, run_id=notice.run_id, channel=channel)
                    is None
                ):
                    continue
            elif notice.kind == "approval_requested" and not target.wants(
                tool=notice.tool, rule=notice.rule, approvers=notice.approvers
            ):
                continue
            items.append(
                OutboxItem(
                    dedup_key=f"{notice.event_id}:{channel}",
                    channel=channel,
                    kind=notice.kind,
                    target_id=notice.target_id,
                    run_id=notice.run_id,
                    event_id=notice.event_id,
                    audit_seq=seq,
                    notice=dataclasses.asdict(notice),
                    event_json=event_json,
                )
            )
        return items

    def _judging(self) -> PolicyAuthority | None:
        """The deciding side's rules when it has a policy of its own, else None (the request's own fields)."""
        return self._rules if self._rules is not None and self._rules.policy is not None else None

    def _with_request_facts(self, notice: Notice) -> Notice:
        for record in self.store.approvals_for(notice.target_id):
            if record.run_id == notice.run_id:
                if (rules := self._judging()) is not None:
                    return as_judged(dataclasses.replace(notice, tool=record.tool_name), record, rules)
                rule = str(record.metadata.get("policy_rule", ""))
                approvers = str(record.metadata.get("policy_approvers", ""))
                return dataclasses.replace(notice, tool=record.tool_name, rule=rule, approvers=approvers)
        return notice

    # -- delivering -------------------------------------------------------------------------
    async def deliver_due(self) -> int:
        """Deliver every due row this process can claim; returns how many were sent."""
        rows = await asyncio.to_thread(claim_due, self.store, owner=self.owner, lease_ms=LEASE_MS)
        if not rows:
            return 0
        results = await asyncio.gather(*(self._deliver_one(row) for row in rows))
        return sum(results)

    async def _deliver_one(self, row: OutboxRow) -> int:
        target = self._targets.get(row.channel)
        if target is None:  # a channel removed from the config: its rows stay pending for a process that has it
            await asyncio.to_thread(defer, self.store, row.id, owner=self.owner, until_ms=row.next_at_ms)
            return 0
        prior: dict[str, Any] | None = None
        if row.kind != "approval_requested" and row.kind != "escalation":
            request = await asyncio.to_thread(
                request_row, self.store, target_id=row.target_id, run_id=row.run_id, channel=row.channel
            )
            if request is not None and request.status == "pending":
                now = await asyncio.to_thread(store_now_ms, self.store)
                await asyncio.to_thread(
                    defer, self.store, row.id, owner=self.owner, until_ms=now + int(self.config.retry.base_s * 1000)
                )
                return 0
            prior = request.receipt if request is not None and request.status == "sent" else None
        notice = Notice(**row.notice)
        try:
            receipt = await asyncio.wait_for(
                deliver(target, notice, event_json=row.event_json, key=row.dedup_key, prior=prior, post=self._post),
                timeout=target.timeout_s + 5,
            )
        except (DeliveryError, TimeoutError) as exc:
            await self._failed(row, target, str(exc) or "timed out")
            return 0
        await asyncio.to_thread(mark_sent, self.store, row.id, owner=self.owner, receipt=receipt)
        logger.info("notification %s sent on %s", row.kind, row.channel)
        return 1

    async def _failed(self, row: OutboxRow, target: Target, error: str) -> None:
        attempts = row.attempts + 1
        retry_at: int | None = None
        if attempts < self.config.retry.max_attempts:
            now = await asyncio.to_thread(store_now_ms, self.store)
            retry_at = now + int(self.config.retry.delay_s(attempts, jitter=self._jitter()) * 1000)
        await asyncio.to_thread(fail, self.store, row.id, owner=self.owner, error=error, retry_at_ms=retry_at)
        if retry_at is None:
            logger.warning(
                "notification %s on %s failed for good after %d tries: %s", row.kind, target.channel, attempts, error
            )
        else:
            logger.info(
                "notification %s on %s failed (try %d), retrying: %s", row.kind, target.channel, attempts, error
            )

    # -- the loop ---------------------------------------------------------------------------
    async def step(self) -> int:
        """One scan and one delivery round; returns how many notices were sent."""
        await asyncio.to_thread(self.scan)
        return await self.deliver_due()

    async def run(self) -> None:
        """Scan and deliver until cancelled; a store outage is logged and retried, never raised."""
        while True:
            try:
                await self.step()
            except StoreError as exc:
                logger.warning("notifications paused: %s", exc)
            await asyncio.sleep(self.config.poll_interval_s)
