"""benchmarks.jobs_scale and benchmarks.vs_prometheus_eval on tiny inputs: the records' structure and
accounting, never timings. The prometheus-eval side runs against a stand-in ``prometheus_eval`` package
(the same API: ``PrometheusEval``, ``VLLM``, ``parse_output``, ``ABSOLUTE_PROMPT``) whose engine answers
from a script; prom-reward's side judges through the stand-in judge server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.jobs_scale import run as scale_run
from benchmarks.vs_prometheus_eval import (
    add_agreement,
    bench_rows,
    reference_scores,
    run_prom_reward,
    run_prometheus_eval,
)
from tests.jobs.helpers import judge_server

pytestmark = pytest.mark.integration  # runs the jobs benchmarks end to end


def test_jobs_scale_record(tmp_path):
    r = scale_run(rows=300, batch_size=100, tmp=tmp_path)
    assert [x["rows"] for x in r["runs"]] == [30, 300] and all(x["peak_rss_mib"] > 0 for x in r["runs"])
    assert r["resume_nothing_left"]["summary"] == {
        **r["resume_nothing_left"]["summary"],
        "rows": 0,
        "resumed_rows": 300,
        "output_rows": 300,
    }
    half = r["resume_half_left"]["summary"]
    assert (half["rows"], half["resumed_rows"], half["output_rows"]) == (200, 100, 300)  # 2 of 3 parts removed
    assert r["output_rows_after_resume"] == 300


FAKE_PE = {
    "__init__.py": "from .judge import PrometheusEval\n",
    "prompts.py": "ABSOLUTE_PROMPT = '{instruction}|{response}|{rubric}|{reference_answer}'\n",
    "parser.py": (
        "def parse_output(text, mode):\n"
        "    if '[RESULT] ' not in text:\n        return None, None\n"
        "    fb, s = text.split('[RESULT] ')\n    return fb.strip(), int(s)\n"
    ),
    "vllm.py": (
        "class _Out:\n    def __init__(self, text):\n"
        "        self.outputs = [type('O', (), {'text': text, 'token_ids': list(range(len(text.split())))})]\n"
        "class _LLM:\n    n = 0\n"
        "    def generate(self, prompts, params, use_tqdm=False):\n"
        "        _LLM.n += 1\n"
        "        return [_Out('Fine. [RESULT] 4' if (_LLM.n > 1 or i % 2) else 'no verdict here')\n"
        "                for i, p in enumerate(prompts)]\n"
        "class VLLM:\n    def __init__(self, model, **kw):\n        self.model = _LLM()\n"
        "    def validate_vllm(self):\n        return True\n"
    ),
    "judge.py": (
        "from .parser import parse_output\n"
        "class PrometheusEval:\n"
        "    def __init__(self, model, absolute_grade_template=''):\n        self.model = model\n"
        "    def absolute_grade(self, *, instructions, responses, rubric, reference_answers, params):\n"
        "        prompts = [f'{a}|{b}' for a, b in zip(instructions, responses)]\n"
        "        outs = self.model.completions(prompts, **params)\n"
        "        todo = [i for i, o in enumerate(outs) if parse_output(o, 'absolute')[0] is None]\n"
        "        if todo:\n"
        "            for i, o in zip(todo, self.model.completions([prompts[i] for i in todo], **params)):\n"
        "                outs[i] = o\n"
        "        return [parse_output(o, 'absolute')[0] for o in outs], "
        "[parse_output(o, 'absolute')[1] for o in outs]\n"
    ),
}


def test_vs_prometheus_eval_records(tmp_path):
    pe = tmp_path / "pe" / "prometheus_eval"
    pe.mkdir(parents=True)
    for name, text in FAKE_PE.items():
        (pe / name).write_text(text)
    rows = bench_rows(4)
    assert len(rows) == 4 and all(r["rubric"].startswith("[") for r in rows)
    b = run_prometheus_eval(str(pe.parent), "unused-model", rows, 8, tmp_path)
    # 4 rows: 2 unparsed at first, re-sampled once: 6 samples, 2 rejected, every row scored
    assert (b["samples"], b["calls"], b["rows_without_score"], b["parse_failure_rate"]) == (6, 2, 0, 0.333)
    assert b["scores"] == [4, 4, 4, 4] and b["tokens_per_decided_row"] == b["generated_tokens"] / 4
    server = judge_server()
    try:
        a = run_prom_reward(["--server", server.url, "--model", "judge"], rows, 8, tmp_path)
    finally:
        server.stop()
    assert (a["rows"], a["samples"], a["parse_failure_rate"]) == (4, 4, 0.0)
    assert all(s in (1.0, 3.0, 5.0) for s in a["scores"]) and a["tokens_per_decided_row"] == 3.0
    assert json.loads(json.dumps(a)) == a and Path(tmp_path / "graded.jsonl").exists()
    # agreement with the rows' GPT-4 grades, over each side's scored rows and over the rows both scored
    b["scores"][1] = None
    record = add_agreement({"rows": 4, "prom_reward": a, "prometheus_eval": b})
    ref = reference_scores(4)
    assert len(ref) == 4 and all(1 <= r <= 5 for r in ref) and record["reference_mean"] == round(sum(ref) / 4, 3)
    errors = [abs(4 - r) for i, r in enumerate(ref) if i != 1]
    assert b["agreement"]["rows"] == b["agreement_common"]["rows"] == a["agreement_common"]["rows"] == 3
    assert a["agreement"]["rows"] == 4 and b["agreement"]["pearson"] is None  # a constant score: no correlation
    assert b["agreement"]["mae"] == round(sum(errors) / 3, 3)
    assert b["agreement"]["within_half"] == round(sum(e < 0.5 for e in errors) / 3, 3)
