"""Sampling options for judge generations (``SamplingConfig``), with the Prometheus papers' defaults; user
options merge over them key by key.

Example:
    >>> cfg = SamplingConfig().merged({"temperature": 0.0})
    >>> (cfg.temperature, cfg.max_tokens, cfg.top_p)
    (0.0, 1024, 0.9)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from prom_reward.errors import ConfigError
from prom_reward.stats import finite_number


@dataclass(frozen=True)
class SamplingConfig:
    """How the judge samples its feedback. Defaults follow Prometheus 2."""

    temperature: float = 1.0
    """Sampling temperature; 1.0 as in the papers (0 = greedy)."""

    top_p: float = 0.9
    """Nucleus sampling mass, in (0, 1]."""

    top_k: int = -1
    """Keep only the k most likely tokens; -1 disables."""

    repetition_penalty: float = 1.03
    """Penalty (> 0) on repeated tokens; 1.03 as in the papers, 1.0 disables."""

    max_tokens: int = 1024
    """Most new tokens per sample (feedback plus verdict); 1024 in Prometheus 2."""

    logprobs: int | None = None
    """Top-k token log-probabilities to return per generated token (None = none).
    Needed for expected scores and confidence; vLLM allows at most 20 by default."""

    seed: int | None = None
    """Per-request seed. Honoured on GPU vLLM and OpenAI servers; the CPU vLLM
    engine cannot take one (seed the engine instead), so it is ignored there."""

    stop: tuple[str, ...] = field(default_factory=tuple)
    """Extra stop strings."""

    def __post_init__(self) -> None:
        def bad(name: str, expected: str) -> ConfigError:
            return ConfigError(f"SamplingConfig.{name}: expected {expected}, got {getattr(self, name)!r}")

        if not finite_number(self.temperature) or self.temperature < 0:
            raise bad("temperature", "a finite number >= 0")
        if not finite_number(self.top_p) or not 0 < self.top_p <= 1:
            raise bad("top_p", "a number in (0, 1]")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or (self.top_k < 1 and self.top_k != -1):
            raise bad("top_k", "a positive int, or -1 to disable")
        if not finite_number(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise bad("repetition_penalty", "a finite number > 0")
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise bad("max_tokens", "an int >= 1")
        if self.logprobs is not None and (not isinstance(self.logprobs, int) or not 0 <= self.logprobs <= 20):
            raise bad("logprobs", "None or an int in 0..20")
        if self.seed is not None and not isinstance(self.seed, int):
            raise bad("seed", "None or an int")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        elif not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))

    def merged(self, overrides: SamplingOverrides) -> SamplingConfig:
        """A copy with ``overrides`` applied key by key; unknown keys raise ConfigError.

        A ``SamplingConfig`` given as overrides replaces this one whole.
        """
        if overrides is None:
            return self
        if isinstance(overrides, SamplingConfig):
            return overrides
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"sampling options: expected a dict or SamplingConfig, got {type(overrides).__name__}")
        valid = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ConfigError(f"unknown sampling option(s) {unknown}; valid options: {', '.join(sorted(valid))}")
        return dataclasses.replace(self, **dict(overrides))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of all fields (for logging and cache keys)."""
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        return d


SamplingOverrides = Mapping[str, Any] | SamplingConfig | None
"""Sampling options for one call: keys merged over a judge's (``SamplingConfig.merged``), a whole
``SamplingConfig``, or None (the judge's own)."""
