"""The exception hierarchy: one root, every public error under it, all of them importable from one module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import goldfive_core
from goldfive_core import errors
from goldfive_core.errors import GoldfiveError


def _modules() -> list[ModuleType]:
    found = []
    for info in pkgutil.walk_packages(goldfive_core.__path__, "goldfive_core."):
        if ".pb." in info.name or info.name.endswith("__main__"):
            continue
        found.append(importlib.import_module(info.name))  # the test environment has every extra
    return found


def _public_errors(module: ModuleType) -> dict[str, type[BaseException]]:
    """The exception classes ``module`` offers by a public name (its own or re-exported)."""
    names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
    return {
        name: obj
        for name in names
        if inspect.isclass(obj := getattr(module, name, None)) and issubclass(obj, BaseException)
    }


def test_the_errors_module_names_every_error_it_defines_each_documented() -> None:
    defined = sorted(n for n, obj in vars(errors).items() if inspect.isclass(obj) and issubclass(obj, BaseException))
    assert errors.__all__ == defined
    for name in errors.__all__:
        error = getattr(errors, name)
        assert issubclass(error, GoldfiveError), name
        assert error.__doc__ and error.__module__ == "goldfive_core.errors", name


def test_every_public_error_anywhere_is_a_goldfive_error_of_the_errors_module() -> None:
    seen = 0
    for module in _modules():
        for name, error in _public_errors(module).items():
            if error.__module__.startswith("goldfive_core"):
                assert issubclass(error, GoldfiveError), f"{module.__name__}.{name} is not a GoldfiveError"
                assert getattr(errors, error.__name__, None) is error, f"{module.__name__}.{name} is not in errors"
                seen += 1
    assert seen >= len(errors.__all__)


@pytest.mark.parametrize(
    ("error", "base"),
    [
        (errors.ConfigError, ValueError),
        (errors.PolicyError, ValueError),
        (errors.LimitError, ValueError),
        (errors.ExpressionError, ValueError),
        (errors.GrantError, ValueError),
        (errors.MissingExtraError, ImportError),
        (errors.RunGone, errors.DeliveryTimeout),
        (errors.DeliveryTimeout, errors.StoreError),
        (errors.UnknownUserError, errors.UserError),
        (errors.UserExistsError, errors.UserError),
    ],
)
def test_secondary_bases_stay_so_old_except_clauses_still_catch(error: type[Exception], base: type[Exception]) -> None:
    assert issubclass(error, base)


def test_errors_stay_importable_from_where_they_were() -> None:
    from goldfive_core.limits import LimitError
    from goldfive_core.payloads import BadPayload
    from goldfive_core.policy import EvalError, ExpressionError, GrantError, PolicyError
    from goldfive_core.server import ApiError, AuthError
    from goldfive_core.server.agents import AgentError
    from goldfive_core.server.notify import DeliveryError
    from goldfive_core.store import DeliveryTimeout, RunGone, StoreError, UnknownApprovalError
    from goldfive_core.store.grants import GrantNotFound
    from goldfive_core.store.http import AgentRefused
    from goldfive_core.store.users import UserError

    assert (LimitError, BadPayload, EvalError, ExpressionError, GrantError, PolicyError) == (
        errors.LimitError,
        errors.BadPayload,
        errors.EvalError,
        errors.ExpressionError,
        errors.GrantError,
        errors.PolicyError,
    )
    assert ApiError is AuthError is AgentError is errors.ApiError  # the server's one refusal type
    assert (DeliveryError, DeliveryTimeout, RunGone, StoreError, UnknownApprovalError) == (
        errors.DeliveryError,
        errors.DeliveryTimeout,
        errors.RunGone,
        errors.StoreError,
        errors.UnknownApprovalError,
    )
    assert (GrantNotFound, AgentRefused, UserError) == (errors.GrantNotFound, errors.AgentRefused, errors.UserError)


def test_the_server_refusal_carries_its_status_fields_and_wait() -> None:
    refused = errors.ApiError(429, "slow down", retry_after_s=3, field="name")
    assert (refused.status, refused.message, refused.retry_after_s, refused.extra) == (
        429,
        "slow down",
        3,
        {"field": "name"},
    )
    assert str(refused) == "slow down"
