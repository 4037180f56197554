"""RLOO with a Prometheus judge as the reward.

Smoke test on CPU (tiny policy, SmolLM2 judge with forced verdicts, 2 steps):

    python rlhf_examples/rloo_prometheus.py --smoke     # or: python -m rlhf_examples.rloo_prometheus --smoke

Real recipe: as in ``grpo_prometheus.py`` (judge servers on GPUs 4-7, policy on 0-3 with
``accelerate launch --config_file rlhf_examples/accelerate_zero3.yaml``), replacing the module name.
"""

from __future__ import annotations

import argparse

if not __package__:  # run as a file, python rlhf_examples/rloo_prometheus.py: import from this checkout
    import _checkout  # noqa: F401

from prom_reward.cli.voice import PlainDescriptionFormatter
from rlhf_examples.common import add_common_args, make_judge, policy_path, prompts_dataset, smoke_env, summary


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=PlainDescriptionFormatter)
    add_common_args(ap)
    args = ap.parse_args(argv)
    smoke_env()
    from trl import RLOOConfig, RLOOTrainer

    from prom_reward.rewards.reward import PrometheusReward

    reward = PrometheusReward(make_judge(args), score="sample", normalize="unit", name="prometheus")
    config = RLOOConfig(
        output_dir=args.output_dir or "outputs/rloo_prometheus",
        max_steps=args.max_steps or (2 if args.smoke else 500),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=16 if args.smoke else 512,
        logging_steps=1,
        report_to="none",
        save_strategy="no" if args.smoke else "steps",
        use_cpu=args.smoke,
        seed=0,
    )
    trainer = RLOOTrainer(
        model=policy_path(args), reward_funcs=reward, args=config, train_dataset=prompts_dataset(args, repeat=2)
    )
    trainer.train()
    return summary("rloo", trainer, "rewards/prometheus/mean")


if __name__ == "__main__":
    main()
