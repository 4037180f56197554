"""Client-side cost of one judgment: render + parse + bookkeeping, with a backend that does nothing.

A no-op backend answers every request at once with a fixed, parseable verdict, so the time
``PrometheusJudge.grade``/``compare`` takes is all library overhead: validating inputs,
neutralising markers, rendering the template, the sampling loop, parsing, building results.
The parts are also timed alone (``render_absolute``, ``parse_output``).

``python -m benchmarks.overhead [--items 2000] [--repeat 3] [--out FILE]``

Example:
    >>> r = measure_overhead(items=20, repeat=1)
    >>> r["grade"]["judgments"], r["grade"]["us_per_judgment"] > 0
    (20, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from prom_reward.backends.base import (
    BackendCapabilities,
    BackendFingerprint,
    Completion,
    GenerationRequest,
    GenerationResult,
    make_fingerprint,
)
from prom_reward.core.judge import PrometheusJudge
from prom_reward.format.parsing import parse_output
from prom_reward.format.render import render_absolute


class NoOpBackend:
    """Answers each request with ``n`` copies of one fixed output; counts no tokens."""

    name = "noop"
    capabilities = BackendCapabilities(
        tokens_at_most_bytes=False, streams_results=False, thread_safe=False, continuation_logprobs=False
    )
    gpu_memory_share = None  # no engine

    def __init__(self, absolute: str = "Clear and correct. [RESULT] 4", relative: str = "A is better. [RESULT] A"):
        self._abs = Completion(absolute, finish_reason="stop", completion_tokens=0)
        self._rel = Completion(relative, finish_reason="stop", completion_tokens=0)

    @property
    def fingerprint(self) -> BackendFingerprint:
        return make_fingerprint(self.name)

    async def agenerate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        return [GenerationResult(((self._rel if "Response A" in r.user else self._abs),) * r.n) for r in requests]

    async def acount_tokens(self, requests: Sequence[GenerationRequest], deadline: float | None = None) -> None:
        return None

    async def acontext_length(self, deadline: float | None = None) -> None:
        return None

    def special_tokens(self) -> tuple[str, ...]:
        return ()  # no tokenizer

    def close(self) -> None:
        pass


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure_overhead(items: int = 2000, repeat: int = 3, response_words: int = 200) -> dict[str, Any]:
    """Best-of-``repeat`` timings (microseconds per judgment) of the library around a no-op backend."""
    judge = PrometheusJudge(backend=NoOpBackend())
    response = " ".join(["word"] * response_words)
    ins, res = [f"Question {i}?" for i in range(items)], [f"{response} {i}" for i in range(items)]
    out: dict[str, Any] = {"items": items, "repeat": repeat, "response_words": response_words}
    grades: list[Any] = []
    t = _best(lambda: grades.__setitem__(slice(None), judge.grade(ins, res, "helpfulness")), repeat)
    assert all(g.score == 4.0 for g in grades)
    out["grade"] = {"judgments": len(grades), "us_per_judgment": 1e6 * t / items}
    t = _best(lambda: judge.compare(ins, res, res, "helpfulness"), repeat)
    out["compare"] = {"judgments": items, "us_per_judgment": 1e6 * t / items}
    t = _best(lambda: judge.compare(ins, res, res, "helpfulness", swap=True), repeat)
    out["compare_swap"] = {"judgments": items, "us_per_judgment": 1e6 * t / items}
    t = _best(lambda: [render_absolute(i, r, "helpfulness") for i, r in zip(ins, res, strict=True)], repeat)
    out["render_absolute"] = {"us_per_call": 1e6 * t / items}
    text = "Feedback " * 150 + "[RESULT] 4"
    t = _best(lambda: [parse_output(text, "absolute") for _ in range(items)], repeat)
    out["parse_output"] = {"us_per_call": 1e6 * t / items}
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.overhead", description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", help="write the JSON record here too")
    args = ap.parse_args(argv)
    from .report import emit, versions

    rec = {"benchmark": "overhead", **measure_overhead(args.items, args.repeat), "versions": versions()}
    emit(rec, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
