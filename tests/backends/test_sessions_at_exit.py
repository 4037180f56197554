"""Every aiohttp session a judge opened is closed: at interpreter exit (``bridge.close_at_exit``), on the loop it
lives on, and when verl's or OpenRLHF's ``reset`` drops the reward it built. aiohttp logs "Unclosed client session"
for one collected open; each path runs in a fresh interpreter against the stand-in judge, no engine."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from prom_reward.integrations import openrlhf_func, verl
from prom_reward.rewards.reward import PrometheusReward
from tests.reward_faults import Case

REPO = Path(__file__).resolve().parents[2]
VERL = "from prom_reward.integrations.verl import compute_score, compute_score_sync\n"
KW = "dict(server=URL, model='stand-in-judge', failure_reward=0.0)"
SCRIPTS = {
    "verl compute_score_sync": VERL + f"print(compute_score_sync('d', 'good', None, {{'question': 'q?'}}, **{KW}))",
    "verl compute_score, asyncio.run per call": VERL
    + "import asyncio\n"
    + "for _ in range(2):\n"
    + f"    print(asyncio.run(compute_score('d', 'good', None, {{'question': 'q?'}}, **{KW})))",
    "openrlhf reward_func": "from prom_reward.integrations.openrlhf_func import reward_func\n"
    "print(reward_func(['Q: hi? A: good'], ['Q: hi? A:'], [None]))",
    "a pickled PrometheusReward in a child": "import pickle, sys\n"
    "reward = pickle.loads(sys.stdin.buffer.read())\n"
    "print(reward(prompts=['q?'], completions=['good']))",
}


def reward(url: str) -> PrometheusReward:
    return PrometheusReward(judge=dict(backend="openai", base_url=url, model="stand-in-judge"))


@pytest.mark.parametrize("path", list(SCRIPTS))
def test_no_session_is_left_unclosed_at_exit(path, stand_in):
    judge = stand_in(Case())
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        URL=judge.url,
        PROM_REWARD_SERVER=judge.url,
        PROM_REWARD_MODEL="stand-in-judge",
        PROM_REWARD_FAILURE_REWARD="0",
    )
    parent = reward(judge.url)
    parent(prompts=["q?"], completions=["good"])  # as TRL does: used, then pickled into its child
    script = "import os\nURL = os.environ['URL']\n" + SCRIPTS[path]
    proc = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(parent),
        env=env,
        cwd=REPO,
        capture_output=True,
        timeout=120,
    )
    parent.close()
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert proc.returncode == 0, err[-3000:]
    assert "5.0" in out, out  # judged: the stand-in grades "good" 5
    assert "Unclosed" not in err, err[-3000:]
    assert judge.chats >= 1


@pytest.mark.parametrize("module", [verl, openrlhf_func], ids=["verl", "openrlhf_func"])
def test_reset_closes_the_reward_it_built(module, stand_in, monkeypatch):
    judge = stand_in(Case())
    for name, value in {"SERVER": judge.url, "MODEL": "stand-in-judge", "FAILURE_REWARD": "0"}.items():
        monkeypatch.setenv(f"PROM_REWARD_{name}", value)
    module.reset()
    try:
        if module is verl:
            assert verl.compute_score_sync("d", "good", None, {"question": "q?"})["score"] == 5.0
        else:
            assert openrlhf_func.reward_func(["Q: hi? A: good"], ["Q: hi? A:"], [None])["rewards"] == [5.0]
        [state] = module._shared.values()
        backend = state.batched.reward.judge.backend
        assert len(backend._sessions) == 1
    finally:
        module.reset()
    assert len(backend._sessions) == 0  # closed on its loop, not left to the collector


def test_reset_leaves_a_configured_reward_open(stand_in):
    judge = stand_in(Case())
    mine = reward(judge.url)
    try:
        verl.configure(mine, failure_reward=0.0)
        assert verl.compute_score_sync("d", "good", None, {"question": "q?"})["score"] == 5.0
        verl.reset()
        assert len(mine.judge.backend._sessions) == 1  # the caller's: closed by the caller
    finally:
        verl.reset()
        mine.close()
