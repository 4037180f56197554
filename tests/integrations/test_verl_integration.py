"""verl's own code runs our reward: its ``ppo_trainer`` config composed with exactly the overrides
docs/verl.md prints, its ``RewardLoopWorker`` and naive reward manager, its reward assembly
(``RewardLoopManager.compute_rm_score``), and, once, its router in front of a real vLLM judge."""

from __future__ import annotations

import asyncio
import inspect
import os
import pickle
import re
import shlex
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import verl  # noqa: F401 (a peer: tests.peers fails the run when it does not import)
from hydra import compose, initialize_config_dir  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop import reward_loop as verl_reward_loop  # noqa: E402
from verl.experimental.reward_loop.reward_loop import RewardLoopManager, RewardLoopWorker, migrate_legacy_reward_impl  # noqa: E402

from prom_reward import PrometheusJudge  # noqa: E402
from prom_reward.backends.base import GenerationRequest  # noqa: E402
from prom_reward.backends.scripted import ScriptedBackend  # noqa: E402
from prom_reward.errors import ConfigError  # noqa: E402
from prom_reward.integrations import verl as prom_verl  # noqa: E402
from prom_reward.integrations.settings import ENV_PREFIX, RewardSettings, setting_names  # noqa: E402
from prom_reward.rewards.diagnostics import DIAG_KEYS  # noqa: E402
from prom_reward.rewards.reward import PrometheusReward  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "verl.md"
CONFIG_DIR = str(Path(verl.__file__).parent / "trainer" / "config")


def doc_launches() -> dict[str, tuple[dict[str, str], list[str]]]:
    """Each ``## section`` of docs/verl.md with a main_ppo launch: (exported env, overrides)."""
    out = {}
    for section in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        block = re.search(r"```bash\n(.*?)```", section, re.S)
        if not block or "verl.trainer.main_ppo" not in block.group(1):
            continue
        text = re.sub(r"#[^\n]*", "", block.group(1)).replace("\\\n", " ")
        env, overrides = {}, []
        for line in text.splitlines():
            words = shlex.split(line)
            if words[:1] == ["export"]:
                env.update(w.split("=", 1) for w in words[1:])
            elif "verl.trainer.main_ppo" in words:
                overrides = words[words.index("verl.trainer.main_ppo") + 1 :]
        out[section.splitlines()[0]] = (env, overrides)
    return out


LAUNCHES = doc_launches()


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def local(overrides: list[str], model_dir: Path) -> list[str]:
    """The doc's overrides with the hub model paths pointed at the local tiny model."""
    return [
        f"{o.split('=', 1)[0]}={model_dir}" if o.split("=", 1)[0].endswith(("model.path", "model_path")) else o
        for o in overrides
    ]


def make_data(tokenizer, samples: list[dict]) -> DataProto:
    """A batch as verl's agent loop hands it to the reward loop (right-padded responses)."""
    prompts = [tokenizer(s["prompt_text"], add_special_tokens=False)["input_ids"] for s in samples]
    responses = [tokenizer(s["response"], add_special_tokens=False)["input_ids"] for s in samples]
    p_len, r_len, pad = max(map(len, prompts)), max(map(len, responses)) + 2, tokenizer.pad_token_id or 0
    b = len(samples)
    p_ids, r_ids = torch.full((b, p_len), pad), torch.full((b, r_len), pad)
    mask = torch.zeros((b, p_len + r_len), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        p_ids[i, p_len - len(p) :], r_ids[i, : len(r)] = torch.tensor(p), torch.tensor(r)
        mask[i, p_len - len(p) : p_len] = 1
        mask[i, p_len : p_len + len(r)] = 1
    batch = TensorDict(
        {"prompts": p_ids, "responses": r_ids, "attention_mask": mask, "input_ids": torch.cat([p_ids, r_ids], 1)},
        batch_size=b,
    )

    def column(values):
        arr = np.empty(b, dtype=object)
        arr[:] = values if not isinstance(values[0], list) else [None] * b
        if isinstance(values[0], list):
            for i, v in enumerate(values):
                arr[i] = v
        return arr

    return DataProto(
        batch=batch,
        non_tensor_batch={
            "data_source": column([s["data_source"] for s in samples]),
            "reward_model": column([{"ground_truth": s["ground_truth"], "style": "model"} for s in samples]),
            "extra_info": column([dict(s["extra_info"]) for s in samples]),
            "raw_prompt": column([[{"role": "user", "content": s["prompt_text"]}] for s in samples]),
        },
    )


SAMPLES = [
    {
        "prompt_text": "How many legs has a cat?",
        "response": "A cat has four legs.",
        "ground_truth": "4",
        "data_source": "pets",
        "extra_info": {"question": "How many legs has a cat?", "index": 0},
    },
    {
        "prompt_text": "Name a colour.",
        "response": "Blue is a colour.",
        "ground_truth": "",
        "data_source": "misc",
        "extra_info": {"prompt": [{"role": "user", "content": "Name a colour."}], "index": 1},
    },
    {
        "prompt_text": "Say hi.",
        "response": "garbled reply",
        "ground_truth": "hi",
        "data_source": "misc",
        "extra_info": {"question": "Say hi.", "index": 2},
    },
]


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    for name in [*setting_names(), "config"]:
        monkeypatch.delenv(ENV_PREFIX + name.upper(), raising=False)
    prom_verl.reset()
    yield
    prom_verl.reset()


def scripted_reward(seen: list[GenerationRequest]) -> PrometheusReward:
    table = {"A cat has four legs.": "Correct. [RESULT] 5", "Blue is a colour.": "Fine. [RESULT] 3"}

    def respond(req: GenerationRequest, i: int) -> str:
        seen.append(req)
        for key, out in table.items():
            if f"###Response to evaluate:\n{key}\n" in req.user:
                return out
        return "no verdict"

    return PrometheusReward(PrometheusJudge(backend=ScriptedBackend(respond=respond), max_retries=0), normalize="unit")


def test_docs_print_three_launches_with_only_reward_keys():
    assert set(LAUNCHES) == {
        "Judge served by verl on its own GPUs (standalone pool)",
        "Judge served by verl on the policy's GPUs (colocated)",
        "Judge servers of your own (explicit URL)",
    }
    for env, overrides in LAUNCHES.values():
        assert "reward.custom_reward_function.path=pkg://prom_reward.integrations.verl" in overrides
        assert "PROM_REWARD_FAILURE_REWARD" in env
    # the legacy keys the old docs printed are printed nowhere now
    for path in [DOC, REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        assert not re.search(r"(^|\s)custom_reward_function\.path=", text), path
        assert "reward_manager=batch" not in text and "verl_reward.py" not in text, path


@pytest.mark.parametrize("name", sorted(LAUNCHES))
def test_doc_launch_composes_in_verl_config(name):
    env, overrides = LAUNCHES[name]
    cfg = compose_config(overrides)  # a key verl 0.9.1 lacks fails here
    reward = cfg.reward
    assert reward.custom_reward_function.path == "pkg://prom_reward.integrations.verl"
    assert reward.custom_reward_function.name == "compute_score"
    assert reward.reward_manager.name == "naive" and reward.reward_manager.source == "register"
    assert reward.reward_model.enable == ("explicit URL" not in name)
    if "standalone" in name:
        assert reward.reward_model.enable_resource_pool and reward.reward_model.n_gpus_per_node == 4
        assert reward.reward_model.nnodes == 1 and reward.reward_model.rollout.name == "vllm"
        s = RewardSettings.load(dict(reward.custom_reward_function.reward_kwargs), env=env)
        assert s.reward.rubric == "helpfulness" and s.reward.normalize == "unit" and s.failure_reward.value == "min"
    # main_ppo does not migrate legacy keys; migrating anyway (fully_async_main does) keeps ours
    assert "migrate_legacy_reward_impl" not in inspect.getsource(__import__("verl.trainer.main_ppo").trainer.main_ppo)
    migrated = migrate_legacy_reward_impl(cfg)
    assert migrated.reward.custom_reward_function.path == "pkg://prom_reward.integrations.verl"


def test_legacy_keys_are_ignored_by_verl_091():
    old = [
        "custom_reward_function.path=/site-packages/prom_reward/verl_reward.py",
        "custom_reward_function.name=compute_score_batch",
        "reward_model.reward_manager=batch",
    ]
    cfg = compose_config(old)
    assert cfg.reward.custom_reward_function.path is None  # main_ppo reads only reward.*: verl's own scorer
    assert cfg.reward.reward_manager.name == "naive"
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

    with pytest.raises(ValueError, match="Unknown reward manager"):
        get_reward_manager_cls(migrate_legacy_reward_impl(cfg).reward.reward_manager.name)  # no 'batch' any more


def run_manager(worker: RewardLoopWorker, data: DataProto, monkeypatch, n_workers: int = 2) -> DataProto:
    """verl's RewardLoopManager.compute_rm_score with in-process workers instead of Ray actors."""

    class Handle:
        class compute_score_batch:  # noqa: N801 (mimics ActorHandle.method.remote)
            @staticmethod
            def remote(chunk):
                return worker.loop.run_until_complete(worker.compute_score_batch(chunk))

    manager = RewardLoopManager.__new__(RewardLoopManager)
    manager.config, manager.reward_model_manager = worker.config, None
    manager.reward_loop_workers = [Handle()] * n_workers
    manager.reward_manager_cls = type(worker.reward_manager)
    monkeypatch.setattr(verl_reward_loop.ray, "get", lambda refs: list(refs))
    return manager.compute_rm_score(data)


def test_reward_loop_worker_scores_a_batch_in_one_judge_call(tiny_model_dir, monkeypatch):
    env, overrides = LAUNCHES["Judge served by verl on its own GPUs (standalone pool)"]
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg = compose_config(local(overrides, tiny_model_dir))
    seen: list[GenerationRequest] = []
    prom_verl.configure(scripted_reward(seen))  # failure_reward from the doc's PROM_REWARD_FAILURE_REWARD=min
    worker = RewardLoopWorker(cfg, reward_router_address="127.0.0.1:1")
    assert worker.reward_manager.is_async_reward_score
    data = make_data(worker.input_tokenizer, SAMPLES)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))

    [state] = prom_verl._shared.values()
    assert state.batched.stats.batches == 1 and state.batched.stats.max_batch == 3  # one judge call
    assert [o["reward_score"] for o in outputs] == [1.0, 0.5, 0.0]  # unit scale; failure 'min' -> 0.0
    infos = [o["reward_extra_info"] for o in outputs]
    assert len({tuple(i) for i in infos}) == 1  # identical keys for every sample
    assert [i["judge_failed"] for i in infos] == [0.0, 0.0, 1.0]
    assert [i["judge_reward"] for i in infos] == [1.0, 0.5, None]
    assert infos[0]["judge_feedback"] == "Correct." and infos[0]["judge_batch_size"] == 3.0
    by = {r.user.split("###Response to evaluate:\n")[1].split("\n")[0]: r.user for r in seen}
    assert "###The instruction to evaluate:\nHow many legs has a cat?\n" in by["A cat has four legs."]
    assert "###Reference Answer (Score 5):\n4\n" in by["A cat has four legs."]
    assert "###Reference Answer" not in by["Blue is a colour."]
    assert "###The instruction to evaluate:\nName a colour.\n" in by["Blue is a colour."]
    assert prom_verl.stats == {"items": 3, "failures": 1}


def test_verl_assembles_rm_scores_and_extra_info_with_a_failed_sample(tiny_model_dir, monkeypatch):
    env, overrides = LAUNCHES["Judge servers of your own (explicit URL)"]
    cfg = compose_config(local(overrides, tiny_model_dir))
    prom_verl.configure(scripted_reward([]), failure_reward=-1.0)
    worker = RewardLoopWorker(cfg, reward_router_address=None)
    data = make_data(worker.input_tokenizer, SAMPLES)
    out = run_manager(worker, data, monkeypatch)  # 3 samples over 2 workers: verl pads and trims
    rm = out.batch["rm_scores"]
    assert rm.shape == data.batch["responses"].shape
    assert rm.sum(-1).tolist() == [1.0, 0.5, -1.0]
    last = data.batch["attention_mask"][:, data.batch["prompts"].size(1) :].sum(1) - 1
    assert rm[torch.arange(3), last].tolist() == [1.0, 0.5, -1.0]
    keys = out.meta_info["reward_extra_keys"]
    assert {"score", "judge_failed", "judge_reward", "judge_feedback", "judge_batch_size"} <= set(keys)
    assert out.non_tensor_batch["judge_failed"].tolist() == [0.0, 0.0, 1.0]
    assert out.non_tensor_batch["judge_reward"].tolist() == [1.0, 0.5, None]
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    metrics = process_validation_metrics(
        ["misc"] * 3, ["u0", "u1", "u2"], {k: list(out.non_tensor_batch[k]) for k in keys}
    )
    assert metrics["misc"]["judge_failed"]["mean@1"] == pytest.approx(1 / 3)
    assert metrics["misc"]["judge_reward"]["mean@1"] == pytest.approx(0.75)  # None skipped, no NaN


def test_drift_diagnostics_reach_verls_reward_extras(tiny_model_dir, monkeypatch):
    """The reward's diag/... metrics are reward extras of every sample (verl's reward_extra_keys), under the
    names TRL logs (after the reward's name) and OpenRLHF's extra_logs carry."""
    _, overrides = LAUNCHES["Judge servers of your own (explicit URL)"]
    cfg = compose_config(local(overrides, tiny_model_dir))
    prom_verl.configure(scripted_reward([]), failure_reward=-1.0)
    worker = RewardLoopWorker(cfg, reward_router_address=None)
    out = run_manager(worker, make_data(worker.input_tokenizer, SAMPLES), monkeypatch, n_workers=1)
    assert set(DIAG_KEYS) <= set(out.meta_info["reward_extra_keys"])
    assert out.non_tensor_batch["judge_batch_size"].tolist() == [3.0] * 3  # one judge call
    for key in DIAG_KEYS:
        assert len(set(out.non_tensor_batch[key].tolist())) == 1, key
    first = {k: out.non_tensor_batch[k][0] for k in DIAG_KEYS}
    assert first["diag/length_spearman"] == 1.0  # the longer of the two judged answers got more (1.0 vs 0.5)
    assert first["diag/length_spearman_groups"] == 0.0  # three prompts, one completion each: no group has two
    assert first["diag/top_score_share"] == 0.5  # unit scale: 1.0 is on top, 0.5 is not
    assert first["diag/feedback_chars_mean"] == 6.5  # "Correct.", "Fine."
    from verl.trainer.ppo.metric_utils import process_validation_metrics

    metrics = process_validation_metrics(
        ["misc"] * 3, ["u0", "u1", "u2"], {k: list(out.non_tensor_batch[k]) for k in DIAG_KEYS}
    )
    assert metrics["misc"]["diag/top_score_share"]["mean@1"] == 0.5


def test_missing_failure_reward_fails_loudly_not_zero(tiny_model_dir):
    _, overrides = LAUNCHES["Judge servers of your own (explicit URL)"]
    worker = RewardLoopWorker(compose_config(local(overrides, tiny_model_dir)))
    prom_verl.configure(scripted_reward([]))
    data = make_data(worker.input_tokenizer, SAMPLES[:1])
    with pytest.raises(ConfigError, match="failure_reward: not set"):
        worker.loop.run_until_complete(worker.compute_score_batch(data))


def test_settings_from_reward_kwargs_env_and_yaml(tmp_path, monkeypatch):
    f = tmp_path / "judge.yaml"
    f.write_text("rubric: honesty\nfailure_reward: 0.25\nmodel: judge\njudge: {max_retries: 0}\n")
    monkeypatch.setenv("PROM_REWARD_CONFIG", str(f))
    monkeypatch.setenv("PROM_REWARD_RUBRIC", "harmlessness")
    s = RewardSettings.load({"normalize": "unit", "max_batch_size": "64"})
    assert (s.reward.rubric, s.failure_reward.value, s.reward.normalize, s.max_batch_size) == (
        "harmlessness",
        0.25,
        "unit",
        64,
    )
    assert s.judge_spec("10.1.2.3:4567").kwargs() == {
        "backend": "openai",
        "base_url": ["http://10.1.2.3:4567/v1"],
        "max_retries": 0,
        "model": "judge",
    }
    explicit = RewardSettings.load({"server": "http://j:8000/v1"})
    assert explicit.judge_spec("x:1").kwargs()["base_url"] == ["http://j:8000/v1"]
    with pytest.raises(ConfigError, match="unknown setting"):
        RewardSettings.load({"rubrik": "x"})
    monkeypatch.delenv("PROM_REWARD_CONFIG")
    with pytest.raises(ConfigError, match="no judge"):
        RewardSettings.load({"failure_reward": 0}, env={}).judge_spec().kwargs()


def test_module_is_the_real_one_and_pickles_by_reference():
    import cloudpickle
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://prom_reward.integrations.verl",
                    "name": "compute_score_sync",
                    "reward_kwargs": {},
                }
            }
        }
    )
    fn = get_custom_reward_fn(cfg)
    assert fn.args[0] is prom_verl.compute_score_sync
    assert cloudpickle.loads(cloudpickle.dumps(fn)).args[0] is prom_verl.compute_score_sync
    assert pickle.loads(pickle.dumps(prom_verl.compute_score)) is prom_verl.compute_score


def test_remote_manager_form_is_sync(monkeypatch):
    prom_verl.configure(scripted_reward([]), failure_reward=0.0)
    out = prom_verl.compute_score_sync("d", "A cat has four legs.", "4", {"question": "Legs?"}, num_turns=None)
    assert out["score"] == 1.0 and out["judge_failed"] == 0.0


def test_concurrent_awaits_are_one_judge_call():
    prom_verl.configure(scripted_reward([]), failure_reward=0.0, batch_window_ms=200)

    async def many():
        return await asyncio.gather(
            *(
                prom_verl.compute_score("d", r, None, {"question": "q"})
                for r in ["A cat has four legs.", "Blue is a colour."] * 4
            )
        )

    outs = asyncio.run(many())
    assert [o["score"] for o in outs] == [1.0, 0.5] * 4
    [state] = prom_verl._shared.values()
    assert state.batched.stats.batches == 1


@pytest.mark.integration
def test_real_vllm_judge_through_verls_router(vllm_server, tiny_model_dir, tmp_path, monkeypatch):
    """verl's NaiveRouter (its own app, uvicorn on 127.0.0.1) in front of a real vLLM server."""
    import socket

    import uvicorn
    from verl.experimental.reward_loop.router.naive_router import NaiveRouter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    router = NaiveRouter(worker_urls=[vllm_server.removesuffix("/v1")])
    hits: list[str] = []

    @router.app.middleware("http")
    async def count(request, call_next):
        hits.append(request.url.path)
        return await call_next(request)

    server = uvicorn.Server(uvicorn.Config(router.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        f = tmp_path / "judge.yaml"  # the tiny model writes no verdicts: keep its answers short
        f.write_text("failure_reward: 0.5\njudge: {max_retries: 0, sampling: {max_tokens: 4}}\n")
        monkeypatch.setenv("PROM_REWARD_CONFIG", str(f))
        _, overrides = LAUNCHES["Judge served by verl on its own GPUs (standalone pool)"]
        cfg = compose_config(local(overrides, tiny_model_dir))
        worker = RewardLoopWorker(cfg, reward_router_address=f"127.0.0.1:{port}")
        assert worker.reward_model_tokenizer is not None
        data = make_data(worker.input_tokenizer, SAMPLES[:2])
        outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    infos = [o["reward_extra_info"] for o in outputs]
    for o, i in zip(outputs, infos, strict=True):
        assert o["reward_score"] == (0.5 if i["judge_failed"] else i["judge_reward"])
        assert i["judge_prompt_tokens"] > 0 and i["judge_batch_size"] == 2.0
    assert "/v1/chat/completions" in hits and "/v1/models" in hits
    [state] = prom_verl._shared.values()
    assert state.batched.reward._judge_spec.kwargs()["base_url"] == [f"http://127.0.0.1:{port}/v1"]
    assert os.getpid() == state.pid


def test_router_mode_reads_the_system_role_from_the_judge_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))  # Mistral-style template: no system role
    s = RewardSettings.load({"failure_reward": 0}, env={})
    assert s.judge_spec("h:1", tok).kwargs()["system_role"] is False
    special = s.judge_spec("h:1", tok).kwargs()["special_tokens"]  # the judge's own turn markers are neutralised
    assert tok.all_special_tokens and set(tok.all_special_tokens) <= set(special)
    assert "<|im_end|>" in s.judge_spec("h:1", tok).kwargs()["special_tokens"]  # the judge's own turn markers
    explicit = RewardSettings.load({"failure_reward": 0, "server": "http://j:1/v1"}, env={})
    assert "system_role" not in explicit.judge_spec("h:1", tok).kwargs()
