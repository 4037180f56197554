"""Code shown in the README compiles, and the GRPO snippet uses only names that exist."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_grpo_snippet_is_ten_lines_and_compiles():
    block = re.search(r"<!-- grpo:start -->\s*```python\n(.*?)```", README.read_text(), re.S).group(1)
    lines = [ln for ln in block.strip().splitlines() if ln.strip()]
    assert len(lines) <= 12
    compile(block, "README-grpo", "exec")
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401

    from prom_reward.rewards.reward import PrometheusReward  # noqa: F401  (the names the snippet imports)

    assert "reward_funcs=reward" in block
