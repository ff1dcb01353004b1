"""The projection's knobs come from FAMIGLIA_PROJECTION_* variables, one per runner field."""

from __future__ import annotations

from services.projection.runner import RunnerConfig
from services.projection.settings import ProjectionSettings


def test_every_runner_knob_is_read_from_its_variable_with_the_field_type() -> None:
    settings = ProjectionSettings.from_env({
        "FAMIGLIA_PROJECTION_GROUP": "g2", "FAMIGLIA_PROJECTION_BATCH": "7", "FAMIGLIA_PROJECTION_BLOCK_MS": "50",
        "FAMIGLIA_PROJECTION_CLAIM_EVERY_S": "0.5", "FAMIGLIA_PROJECTION_FORGET_IDLE_MS": "9",
        "FAMIGLIA_PROJECTION_CACHE": "12", "FAMIGLIA_PROJECTION_CONSUMER": "pod-0",
    })
    config = settings.runner_config()
    assert (config.group, config.batch, config.block_ms, config.claim_every_s, config.forget_idle_ms) == \
        ("g2", 7, 50, 0.5, 9)
    assert isinstance(config.batch, int) and isinstance(config.claim_every_s, float)
    assert config.consumer == "pod-0" and settings.cache_size == 12
    assert config.claim_idle_ms == RunnerConfig().claim_idle_ms  # unset: the runner's default


def test_defaults_and_a_consumer_name_given_by_the_caller() -> None:
    settings = ProjectionSettings.from_env({})
    assert settings.runner_config() == RunnerConfig() and settings.cache_size == 2000
    assert settings.runner_config("c2").consumer == "c2"
