"""``grade`` and ``compare`` read TRL's column names with no option (``prompt`` / ``completion``, ``prompt`` /
``chosen`` / ``rejected``; strings or message lists, made text as the rewards make them), prom-reward's own names
still, an option given wins, and a row holding both names of one role is refused before anything is judged; a
dataset saved by ``datasets`` (``save_to_disk``, ``to_parquet``) is read as it is (issue 35, item 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prom_reward.errors import InputError
from prom_reward.format.columns import DEFAULTS, column_flag
from prom_reward.format.conversation import completion_text, prompt_text
from prom_reward.jobs.kinds import CompareJob, GradeJob
from prom_reward.jobs.run import compare_file, grade_file
from prom_reward.jobs.source import SourceRow, expand_inputs, read_rows
from tests.jobs.helpers import judge_server

ASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
CHAT = [
    {"role": "user", "content": "Hi."},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "2+2?"},
]
SAY = [{"role": "assistant", "content": "good 4"}]

# (name, job, row, what the judge reads: the instruction, then the response(s))
READ = [
    ("grade: our names", GradeJob(), {"instruction": "2+2?", "response": "4"}, ("2+2?", "4")),
    ("grade: TRL standard", GradeJob(), {"prompt": "2+2?", "completion": "4"}, ("2+2?", "4")),
    ("grade: TRL conversational", GradeJob(), {"prompt": ASK, "completion": SAY}, ("2+2?", "good 4")),
    ("grade: multi-turn prompt", GradeJob(), {"prompt": CHAT, "completion": SAY}, (prompt_text(CHAT), "good 4")),
    ("grade: one of each", GradeJob(), {"prompt": "2+2?", "response": "4"}, ("2+2?", "4")),
    (
        "grade: the option wins over both names",
        GradeJob(instruction_column="prompt", response_column="completion"),
        {"instruction": "x", "prompt": "2+2?", "response": "y", "completion": SAY},
        ("2+2?", "good 4"),
    ),
    (
        "grade: a column of another name",
        GradeJob(instruction_column="q"),
        {"q": "2+2?", "response": "4"},
        ("2+2?", "4"),
    ),
    ("compare: our names", CompareJob(), {"instruction": "Q", "response_a": "a", "response_b": "b"}, ("Q", "a", "b")),
    ("compare: TRL standard", CompareJob(), {"prompt": "Q", "chosen": "a", "rejected": "b"}, ("Q", "a", "b")),
    (
        "compare: TRL conversational",
        CompareJob(),
        {"prompt": ASK, "chosen": SAY, "rejected": [{"role": "assistant", "content": "5"}]},
        ("2+2?", "good 4", "5"),
    ),
    (
        "compare: the options win",
        CompareJob(response_a_column="rejected", response_b_column="chosen"),
        {"prompt": "Q", "chosen": "a", "rejected": "b", "response_a": "x"},
        ("Q", "b", "a"),
    ),
]


@pytest.mark.parametrize(("job", "row", "seen"), [c[1:] for c in READ], ids=[c[0] for c in READ])
def test_what_the_judge_reads_of_each_row(job, row, seen):
    item = job.preparer()(SourceRow(0, "in.jsonl:1", {**row, "rubric": "helpfulness"}))
    got = (
        (item.instruction, item.response)
        if isinstance(job, GradeJob)
        else (item.instruction, item.response_a, item.response_b)
    )
    assert got == seen
    assert completion_text(SAY) == "good 4"  # the rewards' own rendering, the one the jobs use


# (name, job, row, what the error says): every one names the row's place and the option that fixes it
REFUSED = [
    (
        "grade: instruction and prompt",
        GradeJob(),
        {"instruction": "a", "prompt": "b", "response": "c"},
        ["in.jsonl:1: row 0", "'instruction' and 'prompt'", "ambiguous", "--instruction-col"],
    ),
    (
        "grade: response and completion",
        GradeJob(),
        {"prompt": "a", "response": "b", "completion": "c"},
        ["'response' and 'completion'", "--response-col"],
    ),
    (
        "compare: response_b and rejected",
        CompareJob(),
        {"prompt": "a", "chosen": "b", "response_b": "c", "rejected": "d"},
        ["'response_b' and 'rejected'", "--response-b-col"],
    ),
    (
        "grade: neither name",
        GradeJob(),
        {"question": "a", "completion": "b"},
        ["'instruction'", "'prompt'", "--instruction-col"],
    ),
    (
        "grade: the option's column missing, TRL's present",
        GradeJob(response_column="answer"),
        {"prompt": "a", "completion": "b"},
        ["column 'answer' missing", "--response-col"],
    ),
    (
        "grade: messages without content",
        GradeJob(),
        {"prompt": [{"role": "user"}], "completion": "b"},
        ["column 'prompt'", "messages", "--instruction-col"],
    ),
    (
        "compare: a completion of another type",
        CompareJob(),
        {"prompt": "a", "chosen": 3, "rejected": "b"},
        ["column 'chosen'", "--response-a-col"],
    ),
]


@pytest.mark.parametrize(("job", "row", "said"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_row_that_cannot_be_read_is_refused_naming_the_option(job, row, said):
    with pytest.raises(InputError) as e:
        job.preparer()(SourceRow(0, "in.jsonl:1", {**row, "rubric": "helpfulness"}))
    flags = {option: column_flag(option) for option in DEFAULTS}
    for word in said:  # the command line says the flag, Python the option's keyword
        assert word in e.value.said(flags), (word, e.value.said(flags))
        assert word.startswith("--") or word in str(e.value)
        assert not word.startswith("--") or f"{word[2:-4].replace('-', '_')}_column" in str(e.value), str(e.value)


def _dataset(tmp_path: Path, how: str, rows: list[dict[str, Any]]) -> str:
    """``rows`` as ``datasets`` saves them: a ``save_to_disk`` folder (2 shards), ``to_parquet``, ``to_json``."""
    import datasets  # in the [train] extra, installed by `make setup`

    ds = datasets.Dataset.from_list(rows)
    if how == "save_to_disk":
        ds.save_to_disk(str(tmp_path / "ds"), num_shards=2)
        return str(tmp_path / "ds")
    path = str(tmp_path / ("ds.parquet" if how == "to_parquet" else "ds.jsonl"))
    ds.to_parquet(path) if how == "to_parquet" else ds.to_json(path)
    return path


TRL_GRADE = [{"prompt": [{"role": "user", "content": f"Q{i}?"}], "completion": [{"role": "assistant", "content": a}]}
             for i, a in enumerate(["good 0", "bad 1", "good 2"])]  # fmt: skip
TRL_PREFS = [
    {"prompt": f"Q{i}?", "chosen": c, "rejected": r} for i, (c, r) in enumerate([("good", "bad"), ("bad", "good")])
]


@pytest.mark.parametrize("how", ["save_to_disk", "to_parquet", "to_json"])
def test_a_trl_dataset_as_datasets_saves_it_grades_with_no_column_option(tmp_path, how):
    src = _dataset(tmp_path, how, TRL_GRADE)
    server = judge_server()
    try:
        s = grade_file(
            src,
            tmp_path / "out.jsonl",
            {"backend": "openai", "base_url": server.url, "model": "judge"},
            rubric="helpfulness",
            progress=False,
        )
        sent = [b["messages"][-1]["content"] for b in server.bodies("/v1/chat/completions")]
    finally:
        server.stop()
    out = list(read_rows(tmp_path / "out.jsonl"))
    assert (s.rows, s.failed) == (3, 0)
    assert [(r["source_index"], r["score"]) for r in out] == [(0, 5.0), (1, 1.0), (2, 5.0)]
    assert out[1]["prompt"] == TRL_GRADE[1]["prompt"] and out[1]["completion"] == TRL_GRADE[1]["completion"]
    assert any("\nQ1?\n" in text and "\nbad 1\n" in text for text in sent)
    assert not any("'role'" in text or '"role"' in text for text in sent)  # text, never a printed message list


@pytest.mark.parametrize("how", ["save_to_disk", "to_parquet"])
def test_trl_preference_data_compares_chosen_as_a(tmp_path, how):
    src = _dataset(tmp_path, how, TRL_PREFS)
    server = judge_server()
    try:
        s = compare_file(
            src,
            tmp_path / "out.parquet",
            {"backend": "openai", "base_url": server.url, "model": "judge"},
            rubric="helpfulness",
            progress=False,
        )
    finally:
        server.stop()
    out = list(read_rows(tmp_path / "out.parquet"))
    assert s.rows == 2 and [(r["chosen"], r["winner"]) for r in out] == [("good", "A"), ("bad", "B")]


def test_an_ambiguous_row_stops_the_job_before_a_judge_call_and_before_the_output_is_touched(tmp_path):
    rows = [{"prompt": "Q?", "completion": "good"}] * 5 + [{"prompt": "Q?", "instruction": "Q?", "completion": "a"}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    out.write_text("an older output\n")
    server = judge_server()
    try:
        with pytest.raises(InputError, match=r"in.jsonl:6: row 5: columns 'instruction' and 'prompt'"):
            grade_file(
                src,
                out,
                {"backend": "openai", "base_url": server.url, "model": "judge"},
                rubric="helpfulness",
                overwrite=True,
                progress=False,
            )
        assert server.bodies("/v1/chat/completions") == []
    finally:
        server.stop()
    assert out.read_text() == "an older output\n" and not (tmp_path / "out.jsonl.parts").exists()


def test_a_save_to_disk_folder_is_its_data_files_in_order_and_a_dataset_dict_is_refused(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list([{"prompt": f"Q{i}", "completion": "a"} for i in range(5)])
    ds.save_to_disk(str(tmp_path / "ds"), num_shards=3)
    files = expand_inputs(tmp_path / "ds")
    assert [Path(f).name for f in files] == [f"data-0000{i}-of-00003.arrow" for i in range(3)]
    assert [r["prompt"] for r in read_rows(tmp_path / "ds")] == [f"Q{i}" for i in range(5)]
    assert [r["prompt"] for r in read_rows(files[1])] == [r["prompt"] for r in ds.shard(3, 1, contiguous=True)]
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(InputError, match=r"a DatasetDict .*splits: train, test\); fix: give one split.s folder"):
        expand_inputs(tmp_path / "dd")
