"""GRPO with a Prometheus judge as the reward.

Smoke test on CPU (tiny policy, SmolLM2 judge with forced verdicts, 2 steps):

    python rlhf_examples/grpo_prometheus.py --smoke     # or: python -m rlhf_examples.grpo_prometheus --smoke

Real recipe on one 8-GPU node: the judge on GPUs 4-7 as dedicated vLLM servers, the
policy trained on GPUs 0-3 with DeepSpeed ZeRO-3:

    prom-reward serve --model prometheus-7b-v2.0 --gpus 4,5,6,7 --port 8104 &   # ports 8104-8107
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch --config_file rlhf_examples/accelerate_zero3.yaml \\
        -m rlhf_examples.grpo_prometheus --policy Qwen/Qwen2.5-1.5B-Instruct \\
        --judge-server http://127.0.0.1:8104/v1 --judge-server http://127.0.0.1:8105/v1 \\
        --judge-server http://127.0.0.1:8106/v1 --judge-server http://127.0.0.1:8107/v1
"""

from __future__ import annotations

import argparse

if not __package__:  # run as a file, python rlhf_examples/grpo_prometheus.py: import from this checkout
    import _checkout  # noqa: F401

from prom_reward.cli.voice import PlainDescriptionFormatter
from rlhf_examples.common import add_common_args, make_judge, policy_path, prompts_dataset, smoke_env, summary


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=PlainDescriptionFormatter)
    add_common_args(ap)
    ap.add_argument("--mode", default="absolute", choices=["absolute", "pairwise_group"])
    args = ap.parse_args(argv)
    smoke_env()
    from trl import GRPOConfig, GRPOTrainer

    from prom_reward.rewards.reward import PrometheusReward

    reward = PrometheusReward(make_judge(args), mode=args.mode, name="prometheus")
    config = GRPOConfig(
        output_dir=args.output_dir or "outputs/grpo_prometheus",
        max_steps=args.max_steps or (2 if args.smoke else 500),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=16 if args.smoke else 512,
        logging_steps=1,
        log_completions=True,
        report_to="none",
        save_strategy="no" if args.smoke else "steps",
        use_cpu=args.smoke,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=policy_path(args), reward_funcs=reward, args=config, train_dataset=prompts_dataset(args, repeat=2)
    )
    trainer.train()
    return summary("grpo", trainer, "rewards/prometheus/mean")


if __name__ == "__main__":
    main()
