"""train_judge.merge.mt19937 draws torch's numbers: the same float32s as ``uniform_`` on a seeded
``torch.Generator``, in any chunking."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from train_judge.merge.mt19937 import MT19937, N, seed_state

SEEDS = [0, 1, 5489, 2**31, 2**32 - 1, 2**32 + 9, 2**40 + 7, 2**63 - 5]


def torch_draws(seed: int, n: int) -> np.ndarray:
    return torch.empty(n).uniform_(generator=torch.Generator().manual_seed(seed)).numpy()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("chunking", ["whole", "one", "state_sized", "random"])
def test_same_numbers_as_torch_in_any_chunking(seed: int, chunking: str):
    n = 5 * N + 17  # past several regenerations of the state
    ref = torch_draws(seed, n)
    sizes = {
        "whole": [n],
        "one": [1] * 40 + [n - 40],
        "state_sized": [N - 1, N, N + 1, 1, n - 3 * N - 1],
        "random": list(np.random.default_rng(seed % 1000).integers(1, 700, size=40)),
    }[chunking]
    gen, out, i = MT19937(seed), np.full(n, -1.0, np.float32), 0
    for k in sizes:
        k = min(int(k), n - i)
        gen.fill(out[i : i + k])
        i += k
    if i < n:
        gen.fill(out[i:])
    assert np.array_equal(out, ref)


def test_draws_are_in_unit_interval_and_uniform():
    out = np.empty(200_000, np.float32)
    MT19937(7).fill(out)
    assert out.min() >= 0.0 and out.max() < 1.0
    counts = np.histogram(out, bins=10, range=(0.0, 1.0))[0]
    assert np.all(np.abs(counts - 20_000) < 5 * np.sqrt(20_000 * 0.9))  # within 5 sigma per decile


def test_seed_state_matches_the_reference_initialisation():
    st = seed_state(5489)  # the reference's default seed: its first output is 3499211612
    gen_out = np.empty(1, np.float32)
    MT19937(5489).fill(gen_out)
    assert st[0] == 5489 and st[N] == N
    assert gen_out[0] == np.float32(3499211612 & 0xFFFFFF) * np.float32(2.0**-24)
