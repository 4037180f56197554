"""The task-vector core shared by task arithmetic, TIES, DARE-TIES and DARE-linear.

With base weights ``b`` and task vectors ``d_i = m_i - b`` (or a LoRA expert's ``delta W``), one
class with three knobs covers the family:

1. ``sparsify`` each ``d_i`` with its density ``k_i`` (fraction of entries kept):
   ``"none"`` keeps everything; ``"magnitude"`` (TIES trim) keeps exactly ``round(k_i * n)`` entries
   of that tensor, the largest magnitudes, ties at the cut-off broken by position (lowest index kept;
   mergekit keeps ``floor(k_i * n)``); ``"random"`` (DARE) drops each entry independently with
   probability ``p = 1 - k_i`` (seeded per tensor name and model) and multiplies the survivors by
   ``1 / k_i`` as in the DARE paper, so the expected value is unchanged (mergekit 0.1.5's ``rescale``
   instead scales each tensor so its L1 norm matches the undropped one; not offered here).
2. ``consensus`` (TIES sign election): ``s = sign(sum_i w_i * d_i')`` per entry (the sign with the
   larger total weighted magnitude), then the disjoint weighted mean over the models that agree:
   ``delta = sum_{i: sign(d_i') = s, d_i' != 0} w_i d_i' / sum_{same i} w_i`` (0 where none agree);
   with ``normalize: false`` the disjoint weighted SUM (no division), as mergekit's ``dare_ties``
   does by default. Where ``sum_i w_i d_i'`` is exactly 0 the elected sign is 0 and the merged delta
   is 0 (mergekit elects + there and averages the positive entries).
   Without consensus: the weighted sum ``delta = sum_i w_i d_i'``.
3. the result ``lambda * delta`` is added to the base by the engine.

Example (two 2x2 task vectors, TIES with density 0.5, weights 1):
    >>> import torch
    >>> d1 = torch.tensor([[4.0, -1.0], [0.5, -3.0]])
    >>> d2 = torch.tensor([[-2.0, 2.5], [-5.0, 1.0]])
    >>> TaskVectorMerge("magnitude", consensus=True).combine([d1.clone(), d2.clone()], [1.0, 1.0], [0.5, 0.5], None)
    tensor([[ 4.0000,  2.5000],
            [-5.0000, -3.0000]])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from prom_reward.errors import ConfigError

from .methods import TensorContext
from .trim import keep_count, magnitude_trim

__all__ = ["SPARSIFIERS", "TaskVectorMerge", "keep_count", "magnitude_trim", "random_drop"]

SPARSIFIERS = ("none", "magnitude", "random")


def random_drop(
    delta: torch.Tensor, density: float, generator: torch.Generator | None, draws: torch.Tensor | None = None
) -> torch.Tensor:
    """DARE: drop each entry with probability ``1 - density``, rescale survivors by ``1 / density`` (in place).

    The uniform draws come from ``generator`` in element order (torch draws a tensor's numbers
    serially), so a tensor merged in chunks gets the same mask as one whole draw; ``draws`` (a float32
    buffer of ``delta``'s size, overwritten) are those numbers drawn ahead. Unchanged bytes from
    earlier versions: the shipped pocket judge is re-made bit for bit. An entry is dropped where its
    draw is ``>= density`` (compared in float32) and becomes +0.0; the mask is applied as a bitwise
    AND of the float bits (all ones where kept), exactly a ``masked_fill_(dropped, 0.0)`` but without
    torch's slow boolean kernels.

    >>> g = torch.Generator().manual_seed(0)
    >>> out = random_drop(torch.ones(1000), 0.25, g)
    >>> sorted(set(out.tolist())) == [0.0, 4.0] and 150 < int((out > 0).sum()) < 350
    True
    """
    if density >= 1.0:
        return delta
    if draws is None:
        assert generator is not None
        draws = torch.rand(delta.numel(), generator=generator)
    # 1.0 where kept (draw < density: not dropped), 0.0 where dropped; 1.0f is 0x3F800000, so >> 29 gives 1, -1
    # is all ones: delta & mask keeps kept entries' bits and makes dropped ones +0.0
    mask = draws.reshape(-1).lt_(density).view(torch.int32).bitwise_right_shift_(29).neg_()
    delta.view(-1).view(torch.int32).bitwise_and_(mask)
    return delta.div_(density)


@dataclass(frozen=True)
class TaskVectorMerge:
    """Sparsify task vectors, optionally elect signs, combine; times ``lambda`` (see module doc)."""

    sparsify: str = "none"
    """``none``, ``magnitude`` (TIES trim) or ``random`` (DARE drop and rescale)."""

    consensus: bool = False
    """TIES sign election and disjoint weighted mean (else a weighted sum)."""

    def __post_init__(self) -> None:
        if self.sparsify not in SPARSIFIERS:
            raise ConfigError(f"sparsify: expected one of {', '.join(SPARSIFIERS)}, got {self.sparsify!r}")

    def combine(
        self,
        deltas: Sequence[torch.Tensor],
        weights: Sequence[float],
        densities: Sequence[float | None],
        generator: Callable[[int], torch.Generator] | None,
        normalize: bool = True,
        draws: Sequence[torch.Tensor | None] | None = None,
        buffer: Callable[[str], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The merged delta (before ``lambda``) of one tensor. Overwrites ``deltas`` (saves memory) and
        may return one of them. ``draws``: DARE's uniform draws per model drawn ahead (see
        ``random_drop``); ``buffer(key)``: reused float32 scratch tensors shaped like the deltas."""
        for i, d in enumerate(deltas):
            density = densities[i]
            k = density if density is not None else 1.0
            if self.sparsify == "magnitude":
                magnitude_trim(d, k)
            elif self.sparsify == "random":
                if draws is not None and draws[i] is not None:
                    random_drop(d, k, None, draws[i])
                elif generator is None:
                    raise ValueError("random sparsification needs a generator")
                else:
                    random_drop(d, k, generator(i))
        buf = buffer or (lambda key: torch.empty_like(deltas[0]))
        if not self.consensus:  # a weighted sum, in the first delta (x * 1.0 is x: skipped)
            total = deltas[0] if weights[0] == 1.0 else deltas[0].mul_(weights[0])
            for w, d in zip(weights[1:], deltas[1:], strict=True):
                total.add_(d, alpha=w)
            return total
        total = torch.mul(deltas[0], weights[0], out=buf("total"))
        for w, d in zip(weights[1:], deltas[1:], strict=True):
            total.add_(d, alpha=w)
        elected = total.sign_()  # sign of the summed weighted mass, in place (0 where the sum is exactly 0)
        den = buf("den").zero_() if normalize else None
        agree = buf("agree")
        num = None
        for w, d in zip(weights, deltas, strict=True):
            # d agrees where sign(d) = elected != 0: there d * elected > 0; zero d elsewhere, in place
            torch.mul(d, elected, out=agree).gt_(0.0)
            d.mul_(agree)
            if num is None:
                num = d.mul_(w)
            else:
                num.add_(d, alpha=w)
            if den is not None:
                den.add_(agree, alpha=w)
        assert num is not None
        if den is None:
            return num
        # entries where no model agrees have num = 0, so clamping den only avoids 0 / 0
        return num.div_(den.clamp_(min=1e-30))

    def __call__(self, ctx: TensorContext) -> torch.Tensor:
        lam = float(ctx.params.get("lambda", 1.0))
        if not self.consensus:  # a weighted sum: fold lambda into the weights, one pass fewer
            return self.combine(
                ctx.tensors,
                [lam * w for w in ctx.weights],
                ctx.densities,
                ctx.generator,
                draws=ctx.draws,
                buffer=ctx.scratch,
            )
        delta = self.combine(
            ctx.tensors,
            ctx.weights,
            ctx.densities,
            ctx.generator,
            normalize=bool(ctx.params.get("normalize", True)),
            draws=ctx.draws,
            buffer=ctx.scratch,
        )
        return delta if lam == 1.0 else delta.mul_(lam)


def density_problems(
    params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]
) -> list[str]:
    """Problems with densities of a sparsifying method: each must be given and lie in (0, 1]."""
    out = []
    for i, k in enumerate(densities):
        if k is None:
            out.append(
                f"models[{i}].density: missing; set parameters.density (fraction of entries kept, "
                "in (0, 1]) or a per-model density"
            )
        elif not (isinstance(k, (int, float)) and 0 < k <= 1):
            out.append(f"models[{i}].density: expected a number in (0, 1] (fraction kept), got {k!r}")
    return out


def consensus_density_problems(
    params: Mapping[str, Any], weights: Sequence[float], densities: Sequence[float | None]
) -> list[str]:
    """The checks of the sign-consensus methods (TIES, DARE-TIES): positive weights and valid densities."""
    from .methods import check_positive_weights

    out = check_positive_weights(params, weights, densities) + density_problems(params, weights, densities)
    if not isinstance(params.get("normalize", True), bool):
        out.append(
            f"parameters.normalize: expected true (disjoint mean) or false (disjoint sum), got {params['normalize']!r}"
        )
    return out
