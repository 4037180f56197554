"""``make demo``: grade the sample rollouts shipped with the package and print rewards.

The default judge, the pocket judge (SmolLM2-135M trained by ``train_judge``), only shows the pipeline: on a GPU
pass a real one, ``--model prometheus-eval/prometheus-7b-v2.0``. What the engine prints goes to ``--log``
(``--verbose`` shows it instead), whose tail is printed if the run fails.

Example:
    >>> rows = load_sample_rollouts()
    >>> len(rows), sorted(rows[0])[:2]
    (8, ['instruction', 'reference_answer'])
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from prom_reward.cli.voice import CliParser, PlainDescriptionFormatter, fds_to, print_error, user_terms, with_fix
from prom_reward.errors import ConfigError, InputError

if TYPE_CHECKING:
    from prom_reward.core.results import Grade, JudgeStats


def load_sample_rollouts() -> list[dict[str, Any]]:
    """The demo rollouts: instruction, response, optional reference_answer, rubric name."""
    text = resources.files("prom_reward").joinpath("assets/sample_rollouts.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _snippet(text: str | None, width: int) -> str:
    flat = " ".join((text or "-").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


@contextlib.contextmanager
def _fds_to(log: Path | None) -> Iterator[TextIO]:
    """Send file descriptors 1 and 2 (this process and the engine processes it starts) to ``log``;
    yield a stream on the original stderr for progress lines. ``log=None``: change nothing."""
    if log is None:
        yield sys.stderr
        return
    term = os.fdopen(os.dup(2), "w", buffering=1)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    with term, fds_to(fd, 1, 2):
        os.close(fd)
        # Python-level writers too: sys.stdout/err may not write to fds 1/2 (pytest, notebooks), and logging
        # handlers made before (a vLLM imported earlier) hold the old streams
        stream = os.fdopen(os.dup(1), "w", buffering=1)
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = stream
        loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values())]
        handlers = [h for lg in loggers if isinstance(lg, logging.Logger) for h in lg.handlers]
        moved = [
            (h, h.setStream(stream))
            for h in handlers
            if isinstance(h, logging.StreamHandler)
            and not isinstance(h, logging.FileHandler)
            and h.stream in (*old, sys.__stdout__, sys.__stderr__)
        ]
        try:
            yield term
        finally:
            for h, prev in moved:
                h.setStream(prev)
            sys.stdout, sys.stderr = old
            stream.close()


@contextlib.contextmanager
def _progress(term: TextIO, what: str) -> Iterator[Callable[[], float]]:
    """A ``what ... 12s`` line, redrawn every second on a terminal (one line otherwise);
    yields a function returning the seconds so far."""
    start = time.perf_counter()
    stop = threading.Event()
    tty = term.isatty()

    def tick() -> None:
        while not stop.wait(1.0):
            term.write(f"\r{what} ... {time.perf_counter() - start:.0f}s")
            term.flush()

    ticker = threading.Thread(target=tick, daemon=True)
    if tty:
        ticker.start()
    else:
        term.write(f"{what} ...\n")
    elapsed = lambda: time.perf_counter() - start  # noqa: E731
    done = False
    try:
        yield elapsed
        done = True
    finally:
        stop.set()
        if tty:
            ticker.join()
        if done:  # a failure says itself
            term.write(f"{chr(13) if tty else ''}{what}: done in {elapsed():.1f}s\n")
        elif tty:
            term.write("\n")
        term.flush()


def _table(
    model: str,
    rows: list[dict[str, Any]],
    grades: list[Grade],
    stats: JudgeStats,
    t_load: float,
    elapsed: float,
    log: Path | None,
) -> str:
    lines = [
        f"\njudge: {model}  (engine start {t_load:.1f}s)",
        f"{'#':>2}  {'rubric':<16} {'score':>5} {'E[score]':>8} {'forced':>6}  response / judge feedback",
    ]
    for i, (r, g) in enumerate(zip(rows, grades, strict=True)):
        score = "None" if g.score is None else f"{g.score:.1f}"
        exp = "-" if g.expected_score is None else f"{g.expected_score:.2f}"
        lines.append(f"{i:>2}  {r['rubric']:<16} {score:>5} {exp:>8} {g.forced:>6}  {_snippet(r['response'], 60)}")
        lines.append(f"{'':>36}feedback: {_snippet(g.feedback, 90)}")
    lines.append(
        f"\n{len(rows)} judgments in {elapsed:.1f}s = {len(rows) / elapsed:.2f} judgments/s; "
        f"{stats.completion_tokens} judge tokens ({stats.completion_tokens / elapsed:.0f} tok/s); "
        f"parse failures {stats.parse_failures}, forced verdicts {stats.forced}, retries {stats.retries}"
    )
    if log is not None:
        lines.append(f"engine log (vLLM/torch messages): {log}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = CliParser(
        prog="python -m prom_reward.cli.demo",
        description=(__doc__ or "").split("\nExample:")[0].strip(),
        formatter_class=PlainDescriptionFormatter,
    )
    ap.add_argument("--model", default="pocket-judge", help="preset, hub id or folder")
    ap.add_argument("--max-tokens", type=int, help="judge output tokens (default: the preset's, else 1024)")
    ap.add_argument(
        "--num-samples", type=int, default=1, help="samples per rollout; the score is their mean (default 1)"
    )
    ap.add_argument(
        "--log",
        default=str(Path(tempfile.gettempdir()) / "prom-reward-demo.log"),
        help="where the engine's messages go (default: %(default)s)",
    )
    ap.add_argument("--verbose", action="store_true", help="print the engine's messages instead of logging them")
    args = ap.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # the demo's 8 short prompts need little
    log = None if args.verbose else Path(args.log)
    rows = load_sample_rollouts()
    sampling = {"max_tokens": args.max_tokens} if args.max_tokens is not None else None
    try:
        with _fds_to(log) as term:
            with _progress(term, f"starting the judge engine ({args.model})") as clock:
                from prom_reward import PrometheusJudge

                judge = PrometheusJudge(
                    model=args.model,
                    sampling=sampling,
                    expected_score=True,
                    num_samples=args.num_samples,
                    max_model_len=4096,
                    enforce_eager=True,
                )
                t_load = clock()
            try:
                with _progress(term, f"judging {len(rows)} rollouts") as clock:
                    grades = judge.grade(
                        [r["instruction"] for r in rows],
                        [r["response"] for r in rows],
                        [r["rubric"] for r in rows],
                        [r.get("reference_answer") for r in rows],
                    )
                    elapsed = clock()
            finally:
                judge.close()
    except (ConfigError, InputError) as e:  # refused before anything ran: one line, as every command says it
        print_error(with_fix(e.said(user_terms(ap)), ap.prog))
        raise SystemExit(2) from None
    except BaseException:
        if log is not None and log.is_file():
            tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            print(f"the demo failed; the last lines of {log}:\n" + "\n".join(tail), file=sys.stderr)
        raise
    print(_table(args.model, rows, grades, judge.stats, t_load, elapsed, log))
    if args.model == "pocket-judge":
        print(pocket_judge_caveat())


def pocket_judge_caveat() -> str:
    """What the pocket judge is, from its own probe record (shipped as ``assets/pocket_judge_probe.json``, a
    copy of the LLMBar figures of the record it names), and the command for a real judge on a GPU."""
    shipped = resources.files("prom_reward").joinpath("assets/pocket_judge_probe.json")
    record = json.loads(shipped.read_text(encoding="utf-8"))
    adv, nat = record["llmbar"]["Adversarial"], record["llmbar"]["Natural"]
    low, high = adv["accuracy_ci"]
    return (
        f"\nThe pocket judge is a 135M-parameter demo of the pipeline, not a judge to trust: its own hacking probe "
        f"({record['record']}, {record['date']}) puts it at chance on LLMBar's adversarial pairs (accuracy "
        f"{adv['accuracy']:.2f}, 95% CI {low:.2f}-{high:.2f}, {adv['pairs']} pairs; Natural {nat['accuracy']:.2f}).\n"
        "On a GPU, a real judge: python -m prom_reward.cli.demo --model prometheus-7b-v2.0"
    )


if __name__ == "__main__":
    main()
