"""What every adapter's owner holds, written once: :class:`Supervision`.

The owner of an adapter's runs (``Runner`` / ``wrap()``, the ADK plugin, ``GoldfiveClaude``, the next one) holds
the control channel a person answers on, the event sinks, the config, the policy and labels, the router that
hands control messages to each run, the session set-up (steerer and detectors) and the execution ledger. A
:class:`Supervision` holds them and builds each run's :class:`~goldfive_core.lifecycle.RunHandle`; an adapter
keeps one and reads and writes those attributes through it (:class:`Supervised`), so ``plugin.ledger`` and
``runner.sinks = ...`` work as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Generic, TypedDict, TypeVar, overload

from .config import SteeringConfig
from .lifecycle import RunHandle, SessionSetup
from .routing import ControlRouter
from .steering import install_default_steering

if TYPE_CHECKING:
    from .control import ControlTransport
    from .events import EventSink
    from .policy import Policy
    from .toolcall import ExecutionLedger

__all__ = ["RunOptions", "Supervised", "Supervision", "SupervisionOptions"]

T = TypeVar("T")


class RunOptions(TypedDict, total=False):
    """What every adapter takes for its runs (``Runner``, ``wrap()``, ``GoldfivePlugin``, ``GoldfiveClaude``).

    ``control``: the channel a person answers on (None: nobody can answer); ``sinks``: receive every event;
    ``config``: the knobs (default ``SteeringConfig.from_env()``); ``policy``: rules on tool calls (default
    ``GOLDFIVE_POLICY``); ``labels``: each run's labels, which rules may match; ``session_setup``: sets up each
    run's session (default: the ladder of docs/flows/escalation.md with the built-in detectors; None: drift is
    only emitted).
    """

    control: ControlTransport | None
    sinks: Iterable[EventSink]
    config: SteeringConfig | None
    policy: Policy | None
    labels: Mapping[str, str] | None
    session_setup: SessionSetup | None


class SupervisionOptions(RunOptions, total=False):
    """:class:`RunOptions` and the execution ledger, for adapters whose tool calls a person approves.

    ``ledger``: records approved calls at most once (default: the channel's, e.g. a StoreChannel's store).
    """

    ledger: ExecutionLedger | None


class Supervision:
    """The channel, sinks, config, policy, labels, router, session set-up and ledger of one adapter's runs.

    ``config`` defaults to ``SteeringConfig.from_env()``; ``ledger`` to the channel's (a
    :class:`~goldfive_core.store.StoreChannel`'s store; an in-memory channel has none); ``session_setup`` to
    :func:`~goldfive_core.steering.install_default_steering` (None installs nothing: drift is only emitted).
    """

    def __init__(
        self,
        *,
        control: ControlTransport | None = None,
        sinks: Iterable[EventSink] = (),
        config: SteeringConfig | None = None,
        policy: Policy | None = None,
        labels: Mapping[str, str] | None = None,
        session_setup: SessionSetup | None = install_default_steering,
        ledger: ExecutionLedger | None = None,
    ) -> None:
        self.control = control
        self.sinks: tuple[EventSink, ...] = tuple(sinks)
        self.config = config if config is not None else SteeringConfig.from_env()
        self.policy = policy
        """Rules on tool calls for every run (None: ``GOLDFIVE_POLICY``, if set)."""
        self.labels: dict[str, str] = dict(labels or {})
        """Each run's labels, which policy rules may match."""
        self.router = ControlRouter(control)
        self.session_setup = session_setup
        self.ledger: ExecutionLedger | None = ledger if ledger is not None else getattr(control, "ledger", None)
        """At-most-once records of approved calls (default: the channel's, e.g. a StoreChannel's store)."""

    def new_run(
        self,
        *,
        adapter: str,
        root_task_id: str | None = None,
        title: str = "run",
        input: object = None,
        session_id: str = "",
        on_behalf_of: str = "",
        records_steps: bool = False,
        app_name: str = "",
    ) -> RunHandle:
        """A new run under this supervision: its session set up, not opened yet (``handle.open()``)."""
        return RunHandle(
            self,
            adapter=adapter,
            setup=self.session_setup,
            root_task_id=root_task_id,
            title=title,
            input=input,
            session_id=session_id,
            on_behalf_of=on_behalf_of,
            records_steps=records_steps,
            app_name=app_name,
        )


class _Through(Generic[T]):
    """An adapter attribute kept in its ``supervision``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Through[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object, objtype: type | None = None) -> T | _Through[T]:
        if obj is None:
            return self
        value: T = getattr(getattr(obj, "supervision"), self._name)  # noqa: B009
        return value

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, "supervision"), self._name, value)  # noqa: B009


class Supervised:
    """An adapter's owner attributes, read and written through its :attr:`supervision`."""

    supervision: Supervision
    control: _Through[ControlTransport | None] = _Through()
    sinks: _Through[tuple[EventSink, ...]] = _Through()
    config: _Through[SteeringConfig] = _Through()
    policy: _Through[Policy | None] = _Through()
    labels: _Through[dict[str, str]] = _Through()
    router: _Through[ControlRouter] = _Through()
    session_setup: _Through[SessionSetup | None] = _Through()
    ledger: _Through[ExecutionLedger | None] = _Through()
