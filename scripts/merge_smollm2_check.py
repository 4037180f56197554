"""By-hand check of the pocket-judge merge on the real SmolLM2-135M-Instruct (heavy: run under the lock).

Makes two random LoRA experts (r=16, all linear layers, small random B) with peft, merges them with
``python -m train_judge.merge`` as linear 0.5/0.5 and as dare_linear (density 0.7), then loads the
DARE-linear result in vLLM (CPU) and asks one question. Run from the repository root::

    flock /tmp/prom_heavy.lock env PYTHONPATH=$PWD VLLM_CPU_KVCACHE_SPACE=1 \\
        .venv/bin/python scripts/merge_smollm2_check.py [WORKDIR]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml


def make_experts(smol: Path, root: Path) -> None:
    """Two random LoRA adapters on every linear layer, B scaled down so the model still talks."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    for seed, name in enumerate(["absolute", "relative"]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(smol, dtype=torch.bfloat16)
        cfg = LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", init_lora_weights=False)
        peft_model = get_peft_model(model, cfg)
        with torch.no_grad():
            for n, p in peft_model.named_parameters():
                if "lora_B" in n:
                    p.mul_(0.01)
        peft_model.save_pretrained(root / name)


def main() -> None:
    from prom_reward.local.models import ensure_smollm2

    smol = ensure_smollm2()
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/merge_smollm2_check")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    make_experts(smol, root)
    for method, params in (("linear", {}), ("dare_linear", {"density": 0.7})):
        config = root / f"{method}.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "method": method,
                    "base_model": str(smol),
                    "output": f"pocket-{method}",
                    "parameters": params,
                    "models": [{"path": "absolute", "weight": 0.5}, {"path": "relative", "weight": 0.5}],
                    "seed": 0,
                }
            )
        )
        start = time.time()
        r = subprocess.run([sys.executable, "-m", "train_judge.merge", str(config)], capture_output=True, text=True)
        print(
            method,
            "exit",
            r.returncode,
            r.stdout.strip(),
            r.stderr[-500:] if r.returncode else "",
            f"({time.time() - start:.1f} s with start-up)",
        )
    print(sorted(os.listdir(root / "pocket-dare_linear")))
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(root / "pocket-dare_linear"), enforce_eager=True, max_model_len=1024, seed=0)
    out = llm.chat(
        [{"role": "user", "content": "What is the capital of France?"}], SamplingParams(max_tokens=20, temperature=0)
    )
    print("vLLM:", repr(out[0].outputs[0].text))


if __name__ == "__main__":
    main()
