"""benchmarks.throughput, benchmarks.tie_cost, benchmarks.overhead end to end on tiny inputs.

Assertions are on the records' structure and consistency (same tokens through both paths,
token accounting), never on timings.
"""

import json
import math

import pytest

from benchmarks.overhead import NoOpBackend, measure_overhead
from benchmarks.overhead import main as overhead_main
from benchmarks.tie_cost import tie_cost
from prom_reward.backends.base import Completion, TokenLogprobs
from prom_reward.backends.sampling import SamplingConfig
from prom_reward.core.judge import PrometheusJudge
from prom_reward.errors import ConfigError
from tests.judges import response_of


def test_overhead_record_and_noop_backend(capsys, tmp_path):
    r = measure_overhead(items=50, repeat=1, response_words=10)
    for k in ("grade", "compare", "compare_swap"):
        assert r[k]["judgments"] == 50 and r[k]["us_per_judgment"] > 0
    assert r["render_absolute"]["us_per_call"] > 0 and r["parse_output"]["us_per_call"] > 0
    judge = PrometheusJudge(backend=NoOpBackend())
    assert judge.compare(["q"], ["a"], ["b"], "helpfulness", swap=True)[0].order_winners == ("A", "B")
    assert overhead_main(["--items", "10", "--repeat", "1", "--out", str(tmp_path / "o.json")]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["grade"]["judgments"] == 10


def test_tie_cost_strategies_scripted():
    def respond(req, i):
        resp = response_of(req)
        if req.sampling.logprobs:  # expected strategy: a distribution tilted by the response
            p4 = 0.7 if resp == "a" else 0.4
            top = {"4": math.log(p4), "3": math.log(1 - p4)}
            toks = (
                TokenLogprobs("Ok", -0.1, {"Ok": -0.1}),
                TokenLogprobs(" [RESULT] ", -0.1, {" [RESULT] ": -0.1}),
                TokenLogprobs("4", math.log(p4), top),
            )
            return Completion("Ok [RESULT] 4", logprobs=toks, finish_reason="stop", completion_tokens=3)
        # sample i of a request: response "a" scores 4,3,4 ... ; "b" always 3 -> k=3 means differ
        return "Ok [RESULT] " + ("3" if resp == "b" or i == 1 else "4")

    judge = PrometheusJudge(backend="scripted", respond=respond)
    out = tie_cost(judge, [("q", "a", "b"), ("q2", "b", "b")], k=3, rounds=2)
    rs, ks, ex = out["resample"], out["k_samples"], out["expected"]
    assert (rs["pairs"], rs["decided"], rs["tie_left_rate"]) == (2, 1, 0.5)
    assert rs["tie_rounds"] == 2  # the identical pair stays tied through both rounds
    assert rs["completion_tokens"] == 8 * 3  # 4 first grades + 2 rounds x 2 re-grades, 3 words each
    assert ks["decided"] == 1 and ks["k"] == 3
    assert ex["decided"] == 1 and ex["with_expected"] == 4
    for r in out.values():
        assert r["tokens_per_decided_pair"] == pytest.approx(
            (r["prompt_tokens"] + r["completion_tokens"]) / r["decided"]
        )
    with pytest.raises(ConfigError, match="unknown tie strategies"):
        tie_cost(judge, [("q", "a", "b")], strategies=("coin",))


@pytest.mark.integration
def test_throughput_both_paths_same_tokens(vllm_engine):
    from benchmarks.throughput import items, measure_throughput

    batch = items(6)
    rec = measure_throughput(vllm_engine, batch, SamplingConfig(max_tokens=12, temperature=0.0), repeat=1)
    raw, lib = rec["raw_vllm"], rec["prom_reward"]
    assert rec["n"] == 6 and raw["prompt_tokens"] == lib["prompt_tokens"] > 0
    assert raw["output_tokens"] == lib["output_tokens"] > 0  # greedy: identical generations
    assert rec["ratio"] == pytest.approx(lib["judgments_per_s"] / raw["judgments_per_s"])
    assert rec["judge_stats"]["items"] == 6 and rec["judge_stats"]["retries"] == 0


@pytest.mark.integration
def test_reward_server_batching_benchmark_on_a_real_judge_server(vllm_server, tmp_path):
    """benchmarks.reward_server_batching end to end: OpenRLHF's own client, one sample per request,
    through `prom-reward reward-server` in front of a real vLLM server; the server forms batches."""
    from benchmarks.reward_server_batching import measure

    rec = measure(vllm_server, items=8, max_tokens=8, repeat=1, window_ms=200.0, log_dir=tmp_path)
    run = rec["runs"][0]
    assert run["server_rewards"] == 8 and run["ratio"] == pytest.approx(run["direct_s"] / run["server_s"])
    assert sum(rec["judge_batch_sizes"]) == 8  # every timed sample judged exactly once
    assert max(rec["judge_batch_sizes"]) >= 4  # concurrent single-sample requests were batched
    assert rec["server_stats"]["samples"] == 4 + 8 and rec["server_stats"]["rejected"] == 0
