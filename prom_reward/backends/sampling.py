"""Sampling options for judge generations (``SamplingConfig``), with the Prometheus papers' defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prom_reward.declared import check, refuse_unknown, setting
from prom_reward.errors import ConfigError


@dataclass(frozen=True)
class SamplingConfig:
    """How the judge samples its feedback. Defaults follow Prometheus 2."""

    temperature: float = setting(1.0, help="Sampling temperature; 1.0 as in the papers (0 = greedy).", ge=0)
    top_p: float = setting(0.9, help="Nucleus sampling mass, in (0, 1].", gt=0, le=1)
    top_k: int = setting(-1, help="Keep only the k most likely tokens; -1 disables.", choices=(-1,), ge=1)
    repetition_penalty: float = setting(
        1.03, help="Penalty (> 0) on repeated tokens; 1.03 as in the papers, 1.0 disables.", gt=0
    )
    max_tokens: int = setting(
        1024, help="Most new tokens per sample (feedback plus verdict); 1024 in Prometheus 2.", ge=1
    )
    logprobs: int | None = setting(
        None,
        help="""Top-k token log-probabilities to return per generated token (None = none). Needed for expected
        scores and confidence; vLLM allows at most 20 by default.""",
        ge=0,
        le=20,
    )
    seed: int | None = setting(
        None,
        help="""Per-request seed. Honoured on GPU vLLM and OpenAI servers; the CPU vLLM engine cannot take one (seed
        the engine instead), so it is ignored there.""",
    )
    stop: tuple[str, ...] = setting(factory=tuple, help="Extra stop strings.")

    def __post_init__(self) -> None:
        if not isinstance(self.stop, tuple):  # one string, or a list of them
            object.__setattr__(self, "stop", (self.stop,) if isinstance(self.stop, str) else tuple(self.stop))
        check(self)

    def merged(self, overrides: SamplingOverrides) -> SamplingConfig:
        """A copy with ``overrides`` applied key by key (a ``SamplingConfig`` replaces it whole)."""
        if overrides is None:
            return self
        if isinstance(overrides, SamplingConfig):
            return overrides
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"sampling options: expected a dict or SamplingConfig, got {type(overrides).__name__}")
        refuse_unknown(overrides, sorted(f.name for f in dataclasses.fields(self)), "sampling option")
        return dataclasses.replace(self, **dict(overrides))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of all fields (for logging and cache keys)."""
        return {**dataclasses.asdict(self), "stop": list(self.stop)}


SamplingOverrides = Mapping[str, Any] | SamplingConfig | None
"""Sampling options for one call: keys merged over a judge's (``SamplingConfig.merged``), a whole
``SamplingConfig``, or None (the judge's own)."""
