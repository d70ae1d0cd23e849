"""SteeringConfig: defaults, explicit values, and environment overrides that never break a run."""

from __future__ import annotations

import logging

import pytest

from goldfive_core import ConfigError, SteeringConfig

ENV = "GOLDFIVE_STEER_APPROVAL_DEFAULT_TIMEOUT_MS"


def test_default_approval_timeout_is_ten_minutes() -> None:
    assert SteeringConfig().approval_default_timeout_ms == 600_000
    assert SteeringConfig.from_env({}).approval_default_timeout_ms == 600_000


@pytest.mark.parametrize(("raw", "expected"), [("1500", 1500), (" 42 ", 42), ("600000", 600_000)])
def test_env_sets_the_default_timeout(raw: str, expected: int) -> None:
    assert SteeringConfig.from_env({ENV: raw}).approval_default_timeout_ms == expected


def test_os_environ_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "2500")
    assert SteeringConfig.from_env().approval_default_timeout_ms == 2500


@pytest.mark.parametrize("raw", ["soon", "-5", "0", "1.5", "", "1e3", "true"])
def test_a_bad_env_value_warns_and_keeps_the_default(raw: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="goldfive_core.config"):
        config = SteeringConfig.from_env({ENV: raw})
    assert config.approval_default_timeout_ms == 600_000
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and ENV in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert "keeping the default" in warnings[0].getMessage()


def test_one_bad_variable_does_not_discard_the_good_ones(caplog: pytest.LogCaptureFixture) -> None:
    env = {ENV: "nope", "GOLDFIVE_STEER_DECIDED_HISTORY": "16"}
    with caplog.at_level(logging.WARNING):
        config = SteeringConfig.from_env(env)
    assert config.approval_default_timeout_ms == 600_000
    assert config.decided_history == 16


def test_explicit_overrides_win_over_the_environment() -> None:
    config = SteeringConfig.from_env({ENV: "1234"}, approval_default_timeout_ms=99)
    assert config.approval_default_timeout_ms == 99


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_explicit_bad_values_raise_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="approval_default_timeout_ms"):
        SteeringConfig(approval_default_timeout_ms=value)  # type: ignore[arg-type]


def test_config_is_frozen() -> None:
    config = SteeringConfig()
    with pytest.raises(AttributeError):
        config.approval_default_timeout_ms = 5  # type: ignore[misc]
