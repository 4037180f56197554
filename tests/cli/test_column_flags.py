"""Every column flag of every command names a column, spelled one way (``--<role>-col``), and a column that does
not exist is refused (issue 44, deliverable 2): the jobs' flags generated from their kinds' declared columns
(``JobKind.column_options``), the report's from ``ReportColumns``, the reward server's from its column settings (a dict
label without the key a setting names fails its sample, naming the flag). A new column joins these tables."""

from __future__ import annotations

import dataclasses
import json

import pytest

from prom_reward.cli.jobs import KINDS
from prom_reward.cli.main import build_parser, main
from prom_reward.format.columns import column_flag
from prom_reward.integrations.openrlhf_func import LABEL_COLUMNS, make_samples
from prom_reward.integrations.settings import setting_names
from prom_reward.report.summarize import ReportColumns
from prom_reward.rewards.config import RewardConfig
from tests.fakes import free_port
from tests.jobs.helpers import argv, rows, write

JOB_FLAGS = [(job, option) for job, kind in KINDS.items() for option in kind.column_options()]
REPORT_FLAGS = [f"{f.name}_column" for f in dataclasses.fields(ReportColumns)]
SERVER_FLAGS = sorted(n for n in setting_names() if n.endswith("_column"))


def _job_rows(job: str, option: str) -> tuple[list[dict], list[str]]:
    if option == "completion_column":  # read in the long layout only
        return [{"id": 0, "prompt": "Q?", "completion": "good 1"}, {"id": 0, "prompt": "Q?", "completion": "bad"}], [
            "--layout",
            "long",
        ]
    return rows(job, 2), []


@pytest.mark.parametrize(("job", "option"), JOB_FLAGS, ids=[f"{j} {column_flag(o)}" for j, o in JOB_FLAGS])
def test_a_job_column_flag_naming_no_column_exits_2_naming_flag_column_row_and_columns(tmp_path, capsys, job, option):
    data, extra = _job_rows(job, option)
    src = write(tmp_path / "in.jsonl", data)
    url = f"http://127.0.0.1:{free_port()}/v1"  # never reached: the input is checked first
    code = main(argv(job, src, tmp_path / "out.jsonl", url, *extra, column_flag(option), "nosuch"))
    err = capsys.readouterr().err
    assert code == 2, err
    for said in (column_flag(option), "'nosuch'", "in.jsonl:1", repr(sorted(data[0]))[1:-1]):
        assert said in err, (said, err)
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("option", REPORT_FLAGS)
def test_a_report_column_flag_naming_no_column_exits_2(tmp_path, capsys, option):
    src = write(tmp_path / "g.jsonl", [{"source_index": 0, "prompt": "Q?", "completion": "7", "score": 5.0}])
    assert main(["report", str(src), "-o", str(tmp_path / "r.html"), column_flag(option), "nosuch"]) == 2
    err = capsys.readouterr().err
    for said in (column_flag(option), "'nosuch'", "g.jsonl", "'completion', 'prompt'"):
        assert said in err, (said, err)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("option", SERVER_FLAGS)
def test_the_reward_server_spells_its_column_flags_as_the_jobs(option):
    parser = build_parser()
    args = parser.parse_args(["reward-server", "--failure-reward", "0", column_flag(option), "x"])
    assert getattr(args, option) == "x"
    former = "--" + option.replace("_", "-")  # --rubric-column: no alias (a 0.x library keeps no rename shims)
    with pytest.raises(SystemExit):
        main(["reward-server", "--failure-reward", "0", former, "x"])
    assert former not in build_parser()._subparsers._group_actions[0].choices["reward-server"].format_help()


@pytest.mark.parametrize("option", sorted(LABEL_COLUMNS.values()))
def test_a_dict_label_without_the_key_a_column_setting_names_fails_its_sample(option):
    label = {"reference_answer": "7", "rubric": "helpfulness", "instruction": "Q?", "checklist": ["Is it 7?"]}
    samples, reasons, _ = make_samples(["Q? 7"], ["Q?"], [label], config=RewardConfig(**{option: "nosuch"}))
    assert samples == [None]
    for said in (column_flag(option), "'nosuch'", "label", json.dumps(sorted(label))[1:-1].replace('"', "'")):
        assert said in str(reasons[0]), (said, reasons[0])
    renamed = {("nosuch" if k == next(f for f, o in LABEL_COLUMNS.items() if o == option) else k): v
               for k, v in label.items()}  # fmt: skip
    samples, reasons, _ = make_samples(["Q? 7"], ["Q?"], [renamed], config=RewardConfig(**{option: "nosuch"}))
    assert reasons == [None] and samples[0] is not None
