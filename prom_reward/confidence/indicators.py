"""Confidence indicators from the judge's own token distributions (``INDICATORS``), each an uncertainty (higher =
less sure); how SE is estimated from the top-k alone is in docs/confidence.md."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from statistics import fmean
from typing import Any

from prom_reward.backends.base import DEFAULT_TOP_K, TokenLogprobs
from prom_reward.errors import ConfigError, UnknownNameError
from prom_reward.registry import Registry

TRUNCATIONS = ("tail", "bucket", "renormalize")


def check_truncation(value: str, setting: str = "truncation") -> str:
    """``value`` when it is one of ``TRUNCATIONS``; else a ``ConfigError`` about ``setting``."""
    if value not in TRUNCATIONS:
        raise ConfigError(f"expected one of {', '.join(TRUNCATIONS)}, got {value!r}", setting)
    return value


def _top_k_probs(position: TokenLogprobs, top_k: int) -> list[float]:
    """The ``top_k`` largest reported probabilities (the sampled token only when it is among them)."""
    probs = sorted(
        (math.exp(lp) for lp in position.top.values() if lp is not None and math.isfinite(lp)), reverse=True
    )[:top_k]
    if not probs and position.logprob is not None and math.isfinite(position.logprob):
        probs = [math.exp(position.logprob)]  # no alternatives reported: the one known probability
    total = sum(probs)
    return [p / total for p in probs] if total > 1.0 else probs  # rounding in the reported logprobs


def token_entropy(position: TokenLogprobs, truncation: str = "tail", top_k: int = DEFAULT_TOP_K) -> float:
    """Entropy (nats) of one position's next-token distribution from its top-k (``truncation``: how the mass
    outside it counts, docs/confidence.md); which token was sampled does not change it."""
    check_truncation(truncation)
    probs = _top_k_probs(position, top_k)
    total = sum(probs)
    if total <= 0:
        return 0.0
    if truncation == "renormalize":
        h = -sum(p / total * math.log(p / total) for p in probs if p > 0)
        return h if h > 0 else 0.0
    rest, cap = 1.0 - total, probs[-1]
    h = -sum(p * math.log(p) for p in probs if p > 0)
    if rest > 1e-12 and (truncation == "bucket" or rest <= cap):
        h -= rest * math.log(rest)
    elif rest > 1e-12:  # tail: no outside token is likelier than the k-th one; the least entropy the rest can have
        full = math.floor(rest / cap)
        remainder = rest - full * cap
        h -= full * cap * math.log(cap) + (remainder * math.log(remainder) if remainder > 1e-15 else 0.0)
    return h if h > 0 else 0.0


def entropy_upper_bound(position: TokenLogprobs, vocab_size: int, top_k: int = DEFAULT_TOP_K) -> float:
    """The most entropy the distribution can have given its top-k and a vocabulary of ``vocab_size``."""
    probs = _top_k_probs(position, top_k)
    rest, others = 1.0 - sum(probs), vocab_size - len(probs)
    h = -sum(p * math.log(p) for p in probs if p > 0)
    if rest > 1e-12 and others > 0:
        h -= rest * math.log(rest / others)
    return h


def mean_entropy(
    logprobs: Sequence[TokenLogprobs] | None, truncation: str = "tail", top_k: int = DEFAULT_TOP_K
) -> float | None:
    """SE of one sample: the mean token entropy over its generated tokens (None without logprobs)."""
    return fmean(token_entropy(p, truncation, top_k) for p in logprobs) if logprobs else None


def mean_nll(logprobs: Sequence[TokenLogprobs] | None) -> float | None:
    """Mean negative log-probability of the sampled tokens (log-perplexity); None without logprobs."""
    values = [-p.logprob for p in logprobs or () if p.logprob is not None and math.isfinite(p.logprob)]
    return fmean(values) if values else None


@dataclass(frozen=True)
class Confidence:
    """Confidence indicators of one judgment (None where the needed logprobs/samples are missing)."""

    entropy: float | None = None
    """SE: mean token entropy (nats) of the judge's generated tokens, averaged over its valid samples."""
    nll: float | None = None
    """Mean negative log-probability of the sampled tokens (log-perplexity), averaged over samples."""
    base_entropy: float | None = None
    """SE of the base model reading the same outputs by teacher forcing (needs a calibration model)."""
    verdict_probability: float | None = None
    """Probability of the judge's own verdict token (not renormalised over the verdicts; mean over samples)."""
    sample_agreement: float | None = None
    """Share of valid samples that agree with the majority verdict (None with fewer than 2)."""
    swap_agreement: float | None = None
    """Pairwise with both orders: 1.0 when both picked the same response, 0.0 otherwise."""
    tokens: int = 0
    """Generated tokens the entropies were averaged over."""

    @property
    def entropy_calibrated(self) -> float | None:
        """SE-Cali: ``entropy - base_entropy`` (None unless both are known)."""
        if self.entropy is None or self.base_entropy is None:
            return None
        return self.entropy - self.base_entropy

    def as_dict(self) -> dict[str, float | None]:
        """The indicators as a flat dict (for JSON lines and logs)."""
        return {**asdict(self), "entropy_calibrated": self.entropy_calibrated}


NO_CONFIDENCE = Confidence()


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None


def confidence_from_samples(samples: Sequence[Any], *, swap_agreement: bool | None = None) -> Confidence:
    """Combine the valid samples of one judgment (``JudgeSample``s of one order) into a ``Confidence``."""
    valid = [s for s in samples if s.verdict is not None]
    if (
        len(valid) < 2
        and swap_agreement is None
        and all(
            s.entropy is None and s.nll is None and s.base_entropy is None and not (s.probabilities or s.scored_tokens)
            for s in valid
        )
    ):
        return NO_CONFIDENCE  # nothing to read (the common case without logprobs)
    probs = [  # back from the renormalised distribution to the token's own probability
        float(s.probabilities.get(str(s.verdict), 0.0)) * (1.0 if s.verdict_mass is None else s.verdict_mass)
        for s in valid
        if s.probabilities
    ]
    return Confidence(
        entropy=_mean([s.entropy for s in valid]),  # (spelled out: this runs once per judgment)
        nll=_mean([s.nll for s in valid]),
        base_entropy=_mean([s.base_entropy for s in valid]),
        verdict_probability=_mean(probs),
        sample_agreement=max(Counter(str(s.verdict) for s in valid).values()) / len(valid) if len(valid) > 1 else None,
        swap_agreement=None if swap_agreement is None else float(swap_agreement),
        tokens=sum(s.scored_tokens for s in valid),
    )


def merge_confidences(parts: Sequence[Confidence | None], *, swap_agreement: float | None = None) -> Confidence:
    """Average several judgments' indicators (``tokens`` summed)."""
    got = [p for p in parts if p is not None]
    means = {f.name: _mean([getattr(p, f.name) for p in got]) for f in fields(Confidence) if f.name != "tokens"}
    if swap_agreement is not None:
        means["swap_agreement"] = swap_agreement
    return Confidence(**means, tokens=sum(p.tokens for p in got))


# -- indicators: Confidence -> uncertainty (higher = less sure) ----------------------------------
Indicator = Callable[[Confidence], "float | None"]


def _one_minus(value: float | None) -> float | None:
    return None if value is None else 1.0 - value


INDICATORS: Registry[Indicator] = Registry("confidence indicator")
NEEDS: dict[str, str] = {}
"""What each indicator needs: logprobs (``confidence=True``), a calibration model, samples >= 2, ``swap=True``."""
for _name, _indicator, _need in (
    ("se", lambda c: c.entropy, "logprobs"),
    ("se_cali", lambda c: c.entropy_calibrated, "calibration"),
    ("perplexity", lambda c: c.nll, "logprobs"),
    ("verdict_probability", lambda c: _one_minus(c.verdict_probability), "logprobs"),
    ("sample_agreement", lambda c: _one_minus(c.sample_agreement), "samples"),
    ("swap_agreement", lambda c: _one_minus(c.swap_agreement), "swap"),
):
    INDICATORS.register(_name, _indicator)
    NEEDS[_name] = _need


def get_indicator(name: str) -> Indicator:
    """The indicator registered as ``name``; a ConfigError lists the valid names."""
    try:
        return INDICATORS.get(name)
    except UnknownNameError as e:
        raise ConfigError(str(e), "indicator") from e


def uncertainty(confidence: Confidence | None, indicator: str) -> float | None:
    """The judgment's uncertainty under ``indicator`` (higher = less sure); None when unknown."""
    return None if confidence is None else get_indicator(indicator)(confidence)
