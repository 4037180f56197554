"""Every error a user can meet on the command line, through the real entry point: exit 2 and ONE line on
stderr, ``prom-reward: error: <what>; fix: <how>``, naming the flag or the column (never the Python
parameter or class), and for a row the file and its line (issue 32, item 8). Each input fails before an
engine or a server starts (``PROM_REWARD_NO_ENGINE``; a judge given is a URL on a closed 127.0.0.1 port)."""

from __future__ import annotations

import json
import pickle
import re
import socket
from pathlib import Path

import pytest

from prom_reward.cli import demo
from prom_reward.cli.main import build_parser, main
from prom_reward.errors import ConfigError, InputError
from tests.fakes import free_port
from tests.jobs.helpers import cli

SHAPE = re.compile(r"^prom-reward: error: .+; fix: .+$")
PYTHON_NAMES = re.compile(r"[A-Z]\w*(?:Config|Options|Settings)\.|\(\w+=\)|\bNone\b|\bbase_url\b|Traceback")
JUDGE = ["--server", "{url}", "--rubric", "helpfulness", "--quiet"]

# (name, argv, what the line must say): {d} is the folder of the files below, {url} a closed port,
# {taken} a port something listens on
CASES = [
    ("grade: missing input", ["grade", "{d}/nope.jsonl", "-o", "{d}/o.jsonl", *JUDGE], ["nope.jsonl", "no such"]),
    ("grade: foreign format", ["grade", "{d}/rows.csv", "-o", "{d}/o.jsonl", *JUDGE], ["rows.csv", ".jsonl"]),
    ("grade: a line not JSON", ["grade", "{d}/badline.jsonl", "-o", "{d}/o.jsonl", *JUDGE], ["badline.jsonl:2"]),
    (
        "grade: missing column",
        ["grade", "{d}/nocol.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["nocol.jsonl:1", "column 'response'", "--response-col"],
    ),
    (
        "grade: instruction and TRL's prompt both",
        ["grade", "{d}/both.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["both.jsonl:2", "'instruction' and 'prompt'", "ambiguous", "--instruction-col"],
    ),
    (
        "compare: response_a and TRL's chosen both",
        ["compare", "{d}/both_ab.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["both_ab.jsonl:1", "'response_a' and 'chosen'", "--response-a-col"],
    ),
    (
        "grade: a DatasetDict folder",
        ["grade", "{d}/dsdict", "-o", "{d}/o.jsonl", *JUDGE],
        ["dsdict", "DatasetDict", "train"],
    ),
    (
        "pairs: TRL prompt/completion rows without --layout long",
        ["pairs", "{d}/pc_long.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["pc_long.jsonl:1", "'completions' missing", "--layout long", "--completions-col"],
    ),
    (
        "grade: column of the wrong type",
        ["grade", "{d}/wrongtype.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["wrongtype.jsonl:2", "column 'response'", "--response-col"],
    ),
    (
        "grade: unknown rubric",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", "--server", "{url}", "--rubric", "kindness"],
        ["--rubric", "'kindness'", "helpfulness"],
    ),
    (
        "grade: rubric file with 4 descriptions",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", "--server", "{url}", "--rubric", "{d}/rubric4.json"],
        ["--rubric", "rubric4.json", "score5_description"],
    ),
    (
        "grade: bad --temperature",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--temperature", "-1"],
        ["--temperature"],
    ),
    (
        "grade: --temperature not a number",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--temperature", "hot"],
        ["grade:", "--temperature", "prom-reward grade --help"],
    ),
    (
        "grade: --max-tokens 0",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--max-tokens", "0"],
        ["--max-tokens"],
    ),
    (
        "grade: --num-samples 0",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--num-samples", "0"],
        ["--num-samples"],
    ),
    (
        "grade: --batch-size 0",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--batch-size", "0"],
        ["--batch-size"],
    ),
    (
        "grade: not a URL",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", "--server", "judge:8000", "--rubric", "helpfulness"],
        ["--server", "http(s)://"],
    ),
    (
        "grade: --wire inst on the chat endpoint",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--wire", "inst"],
        ["--wire 'inst'", "--endpoint 'completions'"],
    ),
    (
        "grade: unknown preset",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", "--model", "prometheus-9b", "--rubric", "helpfulness"],
        ["--model", "'prometheus-9b'", "preset"],
    ),
    ("grade: no judge", ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl"], ["--model", "--server"]),
    (
        "grade: output in a missing folder",
        ["grade", "{d}/good.jsonl", "-o", "{d}/no/o.jsonl", *JUDGE],
        ["no/o.jsonl", "-o"],
    ),
    (
        "grade: output exists",
        ["grade", "{d}/good.jsonl", "-o", "{d}/foreign.jsonl", *JUDGE],
        ["foreign.jsonl", "--resume", "--overwrite"],
    ),
    (
        "grade: --resume on a foreign output",
        ["grade", "{d}/good.jsonl", "-o", "{d}/foreign.jsonl", *JUDGE, "--resume"],
        ["foreign.jsonl", "--overwrite"],
    ),
    (
        "grade: a --store that is not one",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--store", "{d}/bad.db"],
        ["bad.db", "--store"],
    ),
    (
        "grade: bad --replicas",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--ray", "--replicas", "many"],
        ["--replicas"],
    ),
    (
        "grade: unknown flag",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--tempreature", "0"],
        ["grade:", "--tempreature", "prom-reward grade --help"],
    ),
    ("grade: no -o", ["grade", "{d}/good.jsonl", *JUDGE], ["grade:", "-o/--output"]),
    (
        "compare: missing column",
        ["compare", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["good.jsonl:1", "column 'response_a'", "--response-a-col"],
    ),
    (
        "compare: bad --temperature",
        ["compare", "{d}/ab.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--temperature", "-2"],
        ["--temperature"],
    ),
    (
        "pairs: missing column",
        ["pairs", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["good.jsonl:1", "column 'prompt'", "--prompt-col"],
    ),
    (
        "pairs: completions not a list",
        ["pairs", "{d}/pc_str.jsonl", "-o", "{d}/o.jsonl", *JUDGE],
        ["pc_str.jsonl:1", "completions", "--layout long"],
    ),
    (
        "grade: negative --gpus-per-replica",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--ray", "--gpus-per-replica", "-1"],
        ["--gpus-per-replica"],
    ),
    (
        "pairs: unknown --strategy",
        ["pairs", "{d}/pc.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--strategy", "best"],
        ["pairs:", "--strategy", "best_vs_worst"],
    ),
    (
        "pairs: bad --max-tie-rounds",
        ["pairs", "{d}/pc.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--max-tie-rounds", "-1"],
        ["--max-tie-rounds"],
    ),
    ("pairs: parquet output", ["pairs", "{d}/pc.jsonl", "-o", "{d}/o.parquet", *JUDGE], ["o.parquet", ".jsonl"]),
    ("serve: --port 0", ["serve", "--model", "pocket-judge", "--port", "0"], ["--port", "[1, 65535]"]),
    ("serve: taken --port", ["serve", "--model", "pocket-judge", "--port", "{taken}"], ["port {taken}", "--port"]),
    ("serve: bad --host", ["serve", "--model", "pocket-judge", "--host", "no.such.host.invalid"], ["--host"]),
    ("serve: bad --gpus", ["serve", "--model", "pocket-judge", "--gpus", "a,b"], ["--gpus"]),
    ("serve: bad --replicas", ["serve", "--model", "pocket-judge", "--replicas", "x"], ["--replicas"]),
    ("serve: unknown preset", ["serve", "--model", "prometheus-9b"], ["--model", "preset"]),
    ("reward-server: no failure reward", ["reward-server", "--server", "{url}"], ["--failure-reward", "'min'"]),
    (
        "reward-server: failure reward off the scale",
        ["reward-server", "--server", "{url}", "--failure-reward", "99"],
        ["--failure-reward", "at most 5"],
    ),
    (
        "reward-server: failure reward not a number",
        ["reward-server", "--server", "{url}", "--failure-reward", "lots"],
        ["--failure-reward", "'min'"],
    ),
    ("reward-server: no judge", ["reward-server", "--failure-reward", "0"], ["reward-server:", "--server"]),
    (
        "reward-server: unknown rubric",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--rubric", "kindness"],
        ["--rubric", "'kindness'"],
    ),
    (
        "reward-server: --num-samples 0",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--num-samples", "0"],
        ["--num-samples"],
    ),
    (
        "reward-server: bad --temperature",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--temperature", "-1"],
        ["--temperature"],
    ),
    (
        "reward-server: bad --port",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--port", "99999"],
        ["--port"],
    ),
    (
        "reward-server: taken --port",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--port", "{taken}"],
        ["port {taken}", "--port"],
    ),
    (
        "reward-server: missing --config",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--config", "{d}/nope.yaml"],
        ["--config", "nope.yaml"],
    ),
    (
        "reward-server: missing --token-file",
        ["reward-server", "--server", "{url}", "--failure-reward", "0", "--token-file", "{d}/nope"],
        ["--token-file"],
    ),
    ("probe: no judge", ["probe", "-o", "{d}/p.json"], ["probe:", "--model", "--server"]),
    ("probe: not a .json output", ["probe", "-o", "{d}/p.txt", "--server", "{url}"], ["p.txt", ".json"]),
    ("probe: output in a missing folder", ["probe", "-o", "{d}/no/p.json", "--server", "{url}"], ["-o", "no"]),
    ("probe: --limit 0", ["probe", "-o", "{d}/p.json", "--server", "{url}", "--limit", "0"], ["--limit"]),
    ("probe: unknown --parts", ["probe", "-o", "{d}/p.json", "--server", "{url}", "--parts", "all"], ["--parts"]),
    (
        "probe: unknown --edits",
        ["probe", "-o", "{d}/p.json", "--server", "{url}", "--edits", "caps"],
        ["--edits", "'caps'"],
    ),
    (
        "probe: missing --items",
        ["probe", "-o", "{d}/p.json", "--server", "{url}", "--parts", "shifts", "--items", "{d}/nope.jsonl"],
        ["--items", "nope.jsonl"],
    ),
    (
        "probe: unknown rubric",
        [
            "probe",
            "-o",
            "{d}/p.json",
            "--server",
            "{url}",
            "--parts",
            "shifts",
            "--items",
            "{d}/good.jsonl",
            "--rubric",
            "kindness",
        ],
        ["--rubric", "'kindness'"],
    ),
    (
        "grade: no rubric",
        ["grade", "{d}/good.jsonl", "-o", "{d}/o.jsonl", "--server", "{url}"],
        ["good.jsonl:1", "--rubric", "--rubric-col", "null"],
    ),
    ("report: empty folder", ["report", "{d}/empty", "-o", "{d}/r.html"], ["empty: a folder"]),
    ("report: missing input", ["report", "{d}/nope.jsonl", "-o", "{d}/r.html"], ["nope.jsonl"]),
    ("report: foreign format", ["report", "{d}/rows.csv", "-o", "{d}/r.html"], ["rows.csv"]),
    ("report: not a graded file", ["report", "{d}/good.jsonl", "-o", "{d}/r.html"], ["good.jsonl", "'score'"]),
    (
        "report: grade and compare rows mixed",
        ["report", "{d}/mixed.jsonl", "-o", "{d}/r.html"],
        ["mixed.jsonl", "row 1", "one kind"],
    ),
    ("report: not an .html output", ["report", "{d}/graded.jsonl", "-o", "{d}/r.txt"], ["r.txt", ".html"]),
    ("report: output in a missing folder", ["report", "{d}/graded.jsonl", "-o", "{d}/no/r.html"], ["-o"]),
    (
        "report: missing --probe",
        ["report", "{d}/graded.jsonl", "-o", "{d}/r.html", "--probe", "{d}/nope.json"],
        ["--probe"],
    ),
    (
        "report: --extremes -1",
        ["report", "{d}/graded.jsonl", "-o", "{d}/r.html", "--extremes", "-1"],
        ["--extremes"],
    ),
    ("store: missing store", ["store", "info", "{d}/nope.db"], ["nope.db", "--store"]),
    ("store: not a store", ["store", "info", "{d}/bad.db"], ["bad.db"]),
    ("store: export without -o", ["store", "export", "{d}/bad.db"], ["store export:", "-o"]),
    ("store: unknown action", ["store", "show", "{d}/bad.db"], ["store:", "'show'", "prom-reward store --help"]),
    ("unknown command", ["grades", "{d}/good.jsonl"], ["'grades'", "prom-reward --help"]),
]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    def jsonl(name: str, *lines: str) -> None:
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))

    good = json.dumps({"instruction": "Q?", "response": "A."})
    jsonl("good.jsonl", good)
    jsonl("badline.jsonl", good, "{not json")
    jsonl("nocol.jsonl", json.dumps({"instruction": "Q?"}))
    jsonl("wrongtype.jsonl", good, json.dumps({"instruction": "Q?", "response": 5}))
    jsonl("ab.jsonl", json.dumps({"instruction": "Q?", "response_a": "A.", "response_b": "B."}))
    jsonl("pc.jsonl", json.dumps({"prompt": "Q?", "completions": ["A.", "B."]}))
    jsonl(
        "both.jsonl",
        json.dumps({"prompt": "Q?", "response": "A."}),
        json.dumps({"instruction": "Q?", "prompt": "Q?", "response": "A."}),
    )
    jsonl("both_ab.jsonl", json.dumps({"prompt": "Q?", "response_a": "A.", "chosen": "A.", "rejected": "B."}))
    jsonl("pc_long.jsonl", json.dumps({"prompt": "Q?", "completion": "A."}))
    (tmp_path / "dsdict" / "train").mkdir(parents=True)
    (tmp_path / "dsdict" / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    jsonl("graded.jsonl", json.dumps({"instruction": "Q?", "response": "A.", "score": 4.0, "judge_error": None}))
    jsonl("foreign.jsonl", json.dumps({"x": 1}))
    jsonl("pc_str.jsonl", json.dumps({"prompt": "Q?", "completions": "A."}))
    jsonl("mixed.jsonl", json.dumps({"score": 4.0}), json.dumps({"winner": "A"}))
    (tmp_path / "rows.csv").write_text("instruction,response\nQ?,A.\n")
    four = {"criteria": "Kind?", **{f"score{k}_description": f"level {k}" for k in range(1, 5)}}
    (tmp_path / "rubric4.json").write_text(json.dumps(four))
    (tmp_path / "bad.db").write_text("not a judgment store\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


def check_line(err: str, named: list[str]) -> str:
    """The one error line of ``err`` in the shape, saying ``named``, in the user's terms."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert SHAPE.match(line), line
    assert line.count("prom-reward:") == 1 and line.count("error:") == 1 and line.count("fix:") == 1, line
    assert not PYTHON_NAMES.search(line), line
    for word in named:
        assert word in line, f"{word!r} not in {line!r}"
        python = word[2:].replace("-", "_")
        if word.startswith("--") and "_" in python and "[" not in line:  # (reward-server's [sources] name it)
            assert python not in line, line
    return line


@pytest.mark.parametrize(("argv", "named"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_error_is_one_line_with_a_fix(argv, named, files, capsys, monkeypatch):
    monkeypatch.setenv("PROM_REWARD_NO_ENGINE", "1")  # an engine that starts fails the test instead
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(files)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        fill = {"d": str(files), "url": f"http://127.0.0.1:{free_port()}/v1", "taken": str(taken.getsockname()[1])}
        try:
            code = main([a.format(**fill) for a in argv])
        except SystemExit as e:  # argparse's own errors
            code = e.code
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    check_line(err, [w.format(**fill) for w in named])


def test_a_probe_whose_judge_cannot_be_reached_exits_4_naming_the_url_first(files, capsys):
    """As the jobs do (``jobs.summary.EXIT_JUDGE_DOWN``): a judge that is down is not a usage error (2)."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ["probe", "-o", f"{files}/p.json", "--server", url, "--items", f"{files}/good.jsonl", "--limit", "1"]
    code = main([*argv, "--outage-budget-s", "0"])  # not waited for: past the budget the probe stops
    out, err = capsys.readouterr()
    assert code == 4 and out == "" and not (files / "p.json").exists()
    line = check_line(err.strip().splitlines()[-1], ["probe:", url, "Connect", "start the judge"])
    assert line.startswith(f"prom-reward: error: probe: the judge {url} could not be reached"), line
    assert "4 the judge could not be reached" in " ".join(
        build_parser()._subparsers._group_actions[0].choices["probe"].format_help().split()
    )


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["grade", "{d}/nocol.jsonl", "-o", "{d}/o.jsonl", *JUDGE], ["nocol.jsonl:1", "--response-col"]),
        (["reward-server", "--server", "{url}", "--failure-reward", "0", "--num-samples", "0"], ["--num-samples"]),
        (["pairs", "{d}/pc.jsonl", "-o", "{d}/o.jsonl", *JUDGE, "--strategy", "best"], ["pairs:", "--strategy"]),
    ],
)
def test_the_console_script_prints_nothing_else(argv, named, files):
    """As a user runs it (a fresh process): no import-time warning or log line joins the error line."""
    fill = {"d": str(files), "url": f"http://127.0.0.1:{free_port()}/v1"}
    done = cli([a.format(**fill) for a in argv], env={"PROM_REWARD_NO_ENGINE": "1", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2 and done.stdout == ""
    check_line(done.stderr, named)


@pytest.mark.parametrize(
    ("argv", "named"),
    [(["--num-samples", "0"], ["--num-samples"]), (["--max-tokens", "0"], ["--max-tokens"]),
     (["--model", "prometheus-9b"], ["--model"]), (["--modle", "x"], ["demo:", "--modle", "--help"])],
)  # fmt: skip
def test_the_demo_says_its_errors_the_same_way(argv, named, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("PROM_REWARD_NO_ENGINE", "1")
    with pytest.raises(SystemExit) as stop:
        demo.main([*argv, "--log", str(tmp_path / "demo.log")])
    assert stop.value.code == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and all(line.startswith("starting the judge") for line in err[:-1]), err  # progress
    check_line(err[-1], named)


@pytest.mark.parametrize(
    ("error", "python", "flags"),
    [
        (ConfigError("expected an int >= 1 or {None}, got 0; fix: give an int >= 1", "limit", ("None",)),
         "limit: expected an int >= 1 or None, got 0; fix: give an int >= 1",
         "--limit: expected an int >= 1 or null, got 0; fix: give an int >= 1"),
        (ConfigError("got 3 GPUs; fix: give a multiple of {tensor_parallel_size}", "gpus", ("tensor_parallel_size",)),
         "gpus: got 3 GPUs; fix: give a multiple of tensor_parallel_size",
         "--gpus: got 3 GPUs; fix: give a multiple of --tensor-parallel-size"),
        (InputError("row 1: column 'q' missing; fix: name it with {prompt_column}", mentions=("prompt_column",)),
         "row 1: column 'q' missing; fix: name it with prompt_column",
         "row 1: column 'q' missing; fix: name it with --prompt-col"),
        (ConfigError("template lacks {instruction} and {rubric}; fix: x", "rubric"),  # only its mentions are names
         "rubric: template lacks {instruction} and rubric; fix: x",
         "--rubric: template lacks {instruction} and --rubric; fix: x"),
        (ConfigError("the rubric is unknown; fix: x"), "the rubric is unknown; fix: x",
         "the rubric is unknown; fix: x"),
    ],
)  # fmt: skip
def test_an_error_names_its_settings_in_the_callers_terms(error, python, flags):
    """What an error names as a setting is declared where it is raised: Python reads the field, the command
    line the flag (``voice.user_terms``), and nothing else in the text changes."""
    names = {"None": "null", "limit": "--limit", "gpus": "--gpus", "rubric": "--rubric"}
    names |= {"prompt_column": "--prompt-col", "tensor_parallel_size": "--tensor-parallel-size"}
    assert (str(error), error.said(names)) == (python, flags)
    assert pickle.loads(pickle.dumps(error)).said(names) == flags


def test_an_error_about_a_setting_names_its_flag_without_rewriting_its_text():
    """A ``ConfigError`` carries its setting: the command line says it as the flag, the rest of the text as given."""
    from prom_reward.backends.sampling import SamplingConfig
    from prom_reward.cli.main import explain

    with pytest.raises(ConfigError) as e:
        SamplingConfig(top_p=2)
    assert (e.value.setting, str(e.value)) == (
        "top_p",
        "top_p: expected a number in (0, 1], got 2; fix: give a number in (0, 1]",
    )
    said = "--top-p: expected a number in (0, 1], got 2; fix: give a number in (0, 1]"
    assert explain(e.value, {"top_p": "--top-p"}) == said
    assert explain(e.value, {}) == str(e.value)  # a setting the command has no flag for keeps its Python name
    assert pickle.loads(pickle.dumps(e.value)).setting == "top_p"


def test_the_python_api_keeps_its_own_names():
    """The translation is the command line's: a Python caller still reads the parameter it gave."""
    from prom_reward.core.judge import PrometheusJudge

    with pytest.raises(ConfigError, match="num_samples"):
        PrometheusJudge(backend="scripted", outputs=["[RESULT] 4"], num_samples=0)
