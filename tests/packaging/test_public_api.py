"""The public API: every name in ``prom_reward.__all__`` is importable from the package, and what a user
must catch or configure on a reward path (the errors, the outage policy, the failure value) is among them."""

from __future__ import annotations

import prom_reward


def test_every_exported_name_is_there():
    missing = [name for name in prom_reward.__all__ if not hasattr(prom_reward, name)]
    assert missing == [] and len(set(prom_reward.__all__)) == len(prom_reward.__all__)


def test_what_a_reward_path_raises_or_takes_is_exported():
    wanted = {"JudgeUnavailableError", "JudgeConfigError", "ConfigError", "InputError", "PromRewardError"}
    wanted |= {"OutagePolicy", "RewardConfig", "JudgeFailure", "Judge", "PrometheusReward", "PrometheusJudge"}
    assert wanted <= set(prom_reward.__all__)
    assert issubclass(prom_reward.JudgeConfigError, prom_reward.ConfigError)
    assert issubclass(prom_reward.JudgeUnavailableError, prom_reward.PromRewardError)
    assert isinstance(prom_reward.PrometheusJudge(backend="scripted", outputs=[]), prom_reward.Judge)


def test_experimental_features_are_imported_from_their_package_only():
    import prom_reward.experimental as experimental

    assert {"CascadeJudge", "calibrated_judge", "BaseModelReader", "CascadeConfig", "route"} <= set(
        experimental.__all__
    )
    assert [name for name in experimental.__all__ if not hasattr(experimental, name)] == []
    assert set(experimental.__all__).isdisjoint(prom_reward.__all__) and not hasattr(prom_reward, "CascadeJudge")
