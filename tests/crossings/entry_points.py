"""The entry points of the crossing matrix, one adapter each: ``run(cell)`` drives the entry point on the cell's
format, checklist and judge kind with a few rows and returns its ``Outcome``; ``check(cell, out)`` asserts the
documented outcome. Adding an entry point is adding one ``EntryPoint`` to ``ENTRY_POINTS``.

Commands run in process (``prom_reward.cli.main.main(argv)``); their scripted-judge cells run the function the
command calls (``prom_reward.jobs.run``, ``prom_reward.probe.run``) with the scripted judge, which no flag names."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.cli.main import main
from prom_reward.errors import ConfigError, PromRewardError
from prom_reward.jobs.source import read_rows
from prom_reward.rewards.modes import CHECKLIST_MODES
from tests.crossings.cells import CHECKLIST, MODEL, Cell, Outcome
from tests.jobs.helpers import write

Q = "What is 2+2?"
RESPONSES = ("good four", "bad five", "meh 4")
"""Graded 5, 1 and 3 on 1..5 (``cells.GRADES``), mapped onto each format's scale."""
PAIRS = (("good four", "bad five"), ("bad five", "good four"))
"""A wins the first, B the second."""


@dataclass(frozen=True)
class EntryPoint:
    """An entry point: the task it judges (``absolute``: grades, ``relative``: verdicts), whether its rows may
    carry a checklist (which is graded, so it needs a format that grades), how to run it and what to expect."""

    task: str
    run: Callable[[Cell], Outcome]
    check: Callable[[Cell, Outcome], None]
    checklists: bool = True
    refuses_checklists: tuple[str, ...] = ()
    """What the refusal of any checklist names (the entry point judges none: its mode, the mode that does)."""

    def needs(self, cell: Cell) -> str | None:
        """The task a cell's format lacks for this entry point (it must refuse the cell at start), ``checklist``
        when the entry point refuses a checklist whatever the format, else None."""
        tasks = cell.format.tasks
        if self.task not in (*tasks, "either"):
            return self.task
        if cell.checklist and self.refuses_checklists:
            return "checklist"
        if cell.checklist and self.checklists and "absolute" not in tasks:
            return "absolute"
        return None


def command(argv: list[str]) -> Outcome:
    """``prom-reward ARGV`` in this process: its exit status, and the last line it wrote to stderr when it stopped."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(argv)
    lines = [line for line in err.getvalue().splitlines() if line.strip()]
    return Outcome(refused=lines[-1] if code and lines else None, code=code, extra={"stdout": out.getvalue()})


def _refusal(e: ConfigError) -> Outcome:
    return Outcome(refused=str(e), code=2)


def _rubric_file(cell: Cell) -> str:
    path = cell.folder / "rubric.json"
    path.write_text(json.dumps(cell.rubric))
    return str(path)


def _job(cell: Cell, job: str, rows: list[dict[str, Any]], **python: Any) -> tuple[Outcome, Path]:
    src, out = write(cell.folder / f"{job}.jsonl", rows), cell.folder / f"{job}.out.jsonl"
    if cell.kind != "scripted":
        flags = [f"--{k.replace('_', '-')}={v}" for k, v in python.items()]
        argv = [job, str(src), "-o", str(out), *cell.cli_judge(), "--rubric", _rubric_file(cell), "--quiet"]
        return command([*argv, "--outage-budget-s", "0", *flags]), out
    from prom_reward.jobs.run import compare_file, grade_file, pairs_file

    run = {"grade": grade_file, "compare": compare_file, "pairs": pairs_file}[job]
    try:
        run(src, out, cell.judge(), rubric=cell.rubric, progress=False, **python)
    except PromRewardError as e:  # the job's input and options are checked whole, before anything is judged
        return Outcome(refused=str(e), code=2), out
    return Outcome(), out


def _with_checklist(cell: Cell, row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "checklist": CHECKLIST} if cell.checklist else row


# -- grade, compare, pairs, report -----------------------------------------------------------------------------
def run_grade(cell: Cell) -> Outcome:
    rows = [_with_checklist(cell, {"instruction": Q, "response": r}) for r in RESPONSES]
    out, path = _job(cell, "grade", rows)
    if out.refused is None and not out.code:
        out.values = [row["score"] for row in read_rows(path)]
    return out


def check_grade(cell: Cell, out: Outcome) -> None:
    assert out.values == [float(cell.grade(r)) for r in RESPONSES], out


def run_compare(cell: Cell) -> Outcome:
    rows = [_with_checklist(cell, {"instruction": Q, "response_a": a, "response_b": b}) for a, b in PAIRS]
    out, path = _job(cell, "compare", rows)
    if out.refused is None and not out.code:
        out.values = [row["winner"] for row in read_rows(path)]
    return out


def check_compare(cell: Cell, out: Outcome) -> None:
    assert out.values == ["A", "B"], out


def run_pairs(cell: Cell) -> Outcome:
    rows = [_with_checklist(cell, {"prompt": Q, "completions": list(RESPONSES)})]
    strategy = {} if "absolute" in cell.format.tasks else {"strategy": "all_pairs"}
    out, path = _job(cell, "pairs", rows, **strategy)
    if out.refused is None and not out.code:
        out.values = [(row["chosen"], row["rejected"]) for row in read_rows(path)]
    return out


def check_pairs(cell: Cell, out: Outcome) -> None:
    assert out.values and all(cell.rank(c) >= cell.rank(r) for c, r in out.values), out
    assert ("good four", "bad five") in out.values, out


def run_report(job: str) -> Callable[[Cell], Outcome]:
    """``report`` on what ``job`` wrote in this cell."""

    def run(cell: Cell) -> Outcome:
        judged = ENTRY_POINTS[job].run(cell)
        if judged.refused is not None or judged.code:
            return judged
        page = cell.folder / f"{job}.html"
        out = command(["report", str(cell.folder / f"{job}.out.jsonl"), "-o", str(page), "--format", cell.format_arg])
        html = page.read_text() if page.exists() else ""
        out.values = [r in html for r in RESPONSES[: 2 if job == "compare" else 3]]
        return out

    return run


def check_report(cell: Cell, out: Outcome) -> None:
    assert out.code == 0 and out.values and all(out.values), out  # every judged response shown on the page


# -- probe ----------------------------------------------------------------------------------------------------
def run_probe(cell: Cell) -> Outcome:
    """The probe's parts that the format judges (LLMBar's pairs: verdicts; the shifts: grades), two items each."""
    parts = ",".join(p for p, task in (("llmbar", "relative"), ("shifts", "absolute")) if task in cell.format.tasks)
    record = cell.folder / "probe.json"
    # graded items without a rubric of their own, graded with the cell's rubric on the format's scale (the
    # checkout's items carry 5-level rubrics, which a 3-point or binary format refuses)
    items = write(cell.folder / "items.jsonl", [{"instruction": Q, "response": r} for r in RESPONSES[:2]])
    rubric = _rubric_file(cell)
    flags = ["--limit", "2", "--parts", parts, "--edits", "self_grade", "--baseline-samples", "1"]
    flags += ["--items", str(items), "--rubric", rubric]
    if cell.kind == "scripted":
        from prom_reward.probe.run import ProbeConfig
        from prom_reward.probe.run import run_probe as probe

        cfg = ProbeConfig(
            parts=tuple(parts.split(",")),
            limit=2,
            edits=("self_grade",),
            baseline_samples=1,
            resamples=100,
            items=str(items),
            rubric=cell.rubric,
        )
        try:
            got = probe(cell.judge(), cfg)
        except ConfigError as e:
            return _refusal(e)
    else:
        out = command(["probe", "-o", str(record), *cell.cli_judge(), *flags, "--outage-budget-s", "0"])
        if out.code:
            return out
        got = json.loads(record.read_text())
    return Outcome(values=sorted(k for k in ("llmbar", "shifts") if got.get(k)), extra={"record": got})


def check_probe(cell: Cell, out: Outcome) -> None:
    want = sorted(p for p, task in (("llmbar", "relative"), ("shifts", "absolute")) if task in cell.format.tasks)
    assert out.values == want, out
    assert "n/a" not in json.dumps(out.extra["record"]), out.extra["record"]


# -- the rewards (TRL), online DPO --------------------------------------------------------------------------------
def reward_options(cell: Cell, mode: str) -> dict[str, Any]:
    return {"mode": mode, "rubric": cell.rubric, "failure_reward": -1.0}


def _trl_columns(cell: Cell, mode: str) -> dict[str, Any]:
    columns: dict[str, Any] = {"prompts": [Q] * 3, "completions": list(RESPONSES)}
    if mode == "pairwise_reference":
        columns["baseline"] = ["meh 4"] * 3
    if cell.checklist:
        columns["checklist"] = [CHECKLIST] * 3
    return columns


def run_reward(mode: str, asynchronous: bool = False) -> Callable[[Cell], Outcome]:
    """``PrometheusReward`` (or ``AsyncPrometheusReward``) in ``mode``, called as TRL calls a reward function."""

    def run(cell: Cell) -> Outcome:
        import asyncio

        from prom_reward.rewards.reward import AsyncPrometheusReward, PrometheusReward

        try:
            cls = AsyncPrometheusReward if asynchronous else PrometheusReward
            reward = cls(cell.judge(), **reward_options(cell, mode))
        except ConfigError as e:
            return _refusal(e)
        try:
            got: Any = reward(**_trl_columns(cell, mode))
            return Outcome(values=list(asyncio.run(got) if asynchronous else got))
        except ConfigError as e:  # a checklist column in a mode that judges none: refused on the call
            return _refusal(e)
        finally:
            reward.close()

    return run


def check_reward(mode: str) -> Callable[[Cell, Outcome], None]:
    def check(cell: Cell, out: Outcome) -> None:
        assert -1.0 not in out.values and None not in out.values, out
        if mode == "absolute" and not cell.checklist:
            assert out.values == [float(cell.grade(r)) for r in RESPONSES], out
        else:  # ordered as the judge ranks them: good > meh > bad (a checklist's criteria are graded alike)
            good, bad, meh = out.values
            assert good > bad and good >= meh >= bad, out

    return check


def run_online_dpo(cell: Cell) -> Outcome:
    """TRL's online DPO reward: pairs (i, i + B) of two completions per prompt; 1.0 for the winner, 0.0 the loser."""
    from prom_reward.rewards.online_dpo import OnlineDPOJudgeReward

    try:
        reward = OnlineDPOJudgeReward(cell.judge(), rubric=cell.rubric)
    except ConfigError as e:
        return _refusal(e)
    columns: dict[str, Any] = {"checklist": [CHECKLIST] * 4} if cell.checklist else {}
    try:
        return Outcome(values=reward([Q, Q, Q, Q], ["good four", "bad five", "bad five", "good four"], **columns))
    except ConfigError as e:  # a checklist needs grades: refused on the first call
        return _refusal(e)
    finally:
        reward.close()


def check_online_dpo(cell: Cell, out: Outcome) -> None:
    assert out.values == [1.0, 0.0, 0.0, 1.0], out


# -- the frameworks: OpenRLHF's reward server and reward_func, verl, verifiers ----------------------------------
def framework_settings(cell: Cell) -> dict[str, Any]:
    """The ``RewardSettings`` of a server or store cell (what ``--config`` / ``PROM_REWARD_*`` give)."""
    judge: dict[str, Any] = {"max_retries": 0, **({"store": cell.store} if cell.store else {})}
    return {
        "server": cell.url,
        "model": MODEL,
        "format": cell.format_arg,
        "rubric": cell.rubric,
        "failure_reward": -1.0,
        "batch_window_ms": 5,
        "judge": judge,
    }


def _framework_reward(cell: Cell) -> tuple[Any, Any]:
    """(reward, settings) of a cell: built from the settings, or around the scripted judge."""
    from prom_reward.integrations.settings import RewardSettings
    from prom_reward.rewards.reward import PrometheusReward

    if cell.kind == "scripted":
        reward = PrometheusReward(cell.judge(), **reward_options(cell, "absolute"))
        return reward, RewardSettings.around(reward.config, {"failure_reward": -1.0, "batch_window_ms": 5})
    settings = RewardSettings.load(framework_settings(cell), env={})
    return settings.build_reward(), settings


def _labels(cell: Cell) -> list[str]:
    return [json.dumps({"checklist": CHECKLIST} if cell.checklist else {}) for _ in RESPONSES]


def run_reward_func(cell: Cell) -> Outcome:
    from prom_reward.integrations import openrlhf_func

    try:
        reward, settings = _framework_reward(cell)
        openrlhf_func.configure(reward, **({"failure_reward": -1.0, "batch_window_ms": 5}))
        got = openrlhf_func.reward_func([Q + " " + r for r in RESPONSES], [Q + " "] * 3, _labels(cell))
    except ConfigError as e:
        return _refusal(e)
    finally:
        openrlhf_func.reset()
    return Outcome(values=[float(x) for x in got["rewards"]])


def run_reward_server(cell: Cell) -> Outcome:
    """OpenRLHF's remote reward model: ``POST /get_reward`` of the app ``prom-reward reward-server`` serves."""
    from starlette.testclient import TestClient

    from prom_reward.integrations.openrlhf_server import create_app

    try:
        reward, settings = _framework_reward(cell)
        with TestClient(create_app(reward, settings)) as client:
            body = {"query": [Q + " " + r for r in RESPONSES], "prompts": [Q + " "] * 3, "labels": _labels(cell)}
            got = client.post("/get_reward", json=body).json()
    except ConfigError as e:
        return _refusal(e)
    return Outcome(values=[float(x) for x in got["rewards"]])


def run_verl(cell: Cell) -> Outcome:
    import asyncio

    from prom_reward.integrations import verl

    try:
        reward, _ = _framework_reward(cell)
        verl.configure(reward, failure_reward=-1.0, batch_window_ms=5)

        async def score() -> list[Any]:
            info = [{"question": Q, **({"checklist": CHECKLIST} if cell.checklist else {})} for _ in RESPONSES]
            calls = [verl.compute_score(solution_str=r, extra_info=i) for r, i in zip(RESPONSES, info, strict=True)]
            return [out["score"] for out in await asyncio.gather(*calls)]

        return Outcome(values=asyncio.run(score()))
    except ConfigError as e:
        return _refusal(e)
    finally:
        verl.reset()


def run_verifiers(cell: Cell) -> Outcome:
    import asyncio

    from prom_reward.integrations import verifiers_judge as vj

    reward: dict[str, Any] = {"format": cell.format_arg, "rubric": cell.rubric}
    judge: dict[str, Any] = {"max_retries": 0, **({"store": cell.store} if cell.store else {})}
    try:
        config = vj.PrometheusVerifiersJudgeConfig(server=[cell.url], model=MODEL, reward=reward, judge=judge)
        judge_ = vj.PrometheusVerifiersJudge(config)

        async def score() -> list[Any]:
            return [(await judge_.evaluate(question=Q, response=r)).parsed for r in RESPONSES]

        return Outcome(values=asyncio.run(score()))
    except ConfigError as e:
        return _refusal(e)
    except ValueError as e:  # verifiers' config (pydantic) wraps the ConfigError its validator raised
        return Outcome(refused=str(e.errors()[0]["msg"]).removeprefix("Value error, "), code=2)  # type: ignore[attr-defined]
    finally:
        vj.reset()


ENTRY_POINTS: dict[str, EntryPoint] = {
    "grade": EntryPoint("absolute", run_grade, check_grade),
    "compare": EntryPoint("relative", run_compare, check_compare, checklists=False),
    "pairs": EntryPoint("either", run_pairs, check_pairs),  # by grades, or head to head in a pairwise-only format
    "report-grade": EntryPoint("absolute", run_report("grade"), check_report),
    "report-compare": EntryPoint("relative", run_report("compare"), check_report, checklists=False),
    "probe": EntryPoint("either", run_probe, check_probe, checklists=False),
    "reward-server": EntryPoint("absolute", run_reward_server, check_reward("absolute")),
    "reward_func": EntryPoint("absolute", run_reward_func, check_reward("absolute")),
    "verl": EntryPoint("absolute", run_verl, check_reward("absolute")),
    "verifiers": EntryPoint("absolute", run_verifiers, check_reward("absolute"), checklists=False),
    "online-dpo": EntryPoint("relative", run_online_dpo, check_online_dpo),
    **{
        f"{cls}-{mode}": EntryPoint(
            "absolute" if mode == "absolute" else "relative",
            run_reward(mode, cls == "async"),
            check_reward(mode),
            refuses_checklists=() if mode in CHECKLIST_MODES else (repr(mode), "mode='absolute'"),
        )
        for cls in ("sync", "async")
        for mode in ("absolute", "pairwise_group", "pairwise_reference")
    },
}
"""Every entry point of the matrix, by name (``sync-``/``async-``: ``PrometheusReward`` / ``AsyncPrometheusReward``
in each ``rewards.config.MODES`` mode)."""
