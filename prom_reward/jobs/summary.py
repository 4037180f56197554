"""``JobSummary``: what one run of a job did, the same for every kind and path; every outcome counted once as
``judged``, ``failed`` or ``skipped`` by reason (printed for a person on stderr, as one JSON line on stdout)."""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

EXIT_SOME_FAILED = 3
"""Exit status of a job the backend failed some rows of (a ``--resume`` judges them again)."""
EXIT_JUDGE_DOWN = 4
"""Exit status of a job whose judge failed every row it judged."""
EXIT_CODES = (
    "exit status: 0 every row judged has its outcome (a verdict, a tie, or the judge's 'no verdict', counted); "
    "2 bad input, options or a misconfigured judge (nothing judged), or a stop the error names (a full disk, an "
    f"input changed while the job ran: what was committed is kept); {EXIT_SOME_FAILED} the judge backend failed "
    f"some rows (--resume judges them again); {EXIT_JUDGE_DOWN} the judge could not be reached or refused every "
    "request (the first error line names the URL and the cause); 130 interrupted (--resume continues)"
)
"""The exit statuses of ``grade``, ``compare`` and ``pairs`` (their ``--help`` ends with it)."""


@dataclass
class JobSummary:
    """Counts of one run."""

    job: str = ""
    """``grade``, ``compare`` or ``pairs``."""
    output: str = ""
    """Where the rows are: the output file, or the part folder."""
    rows: int = 0
    """Input rows judged by this run (a long-layout group: its rows)."""
    resumed_rows: int = 0
    """Input rows committed by an earlier run of the same job, not judged again."""
    judged: int = 0
    """Outcomes with a result: rows with a score or a winner, pairs written."""
    failed: int = 0
    """Outcomes without one that failed (see ``judge_error``); ties are not failures."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Outcomes without a result that did not fail, by reason (``jobs.spec.SKIPPED``)."""
    no_expected: dict[str, int] = field(default_factory=dict)
    """``grade --expected``: rows with a score but a null ``expected_score``, by why."""
    backend_failed: int = 0
    """Of ``failed``: rows whose judge backend failed ("backend failed: ..."); a resume judges them again."""
    backend_error: str = ""
    """The first backend failure's message; empty when none."""
    retried_rows: int = 0
    """Rows an earlier run wrote after its backend failed, judged again by this run (in ``rows``)."""
    repaired_parts: int = 0
    """Part files a killed run left half-written, removed and judged again."""
    pairs: int = 0
    """``pairs``: preference pairs written by this run (its ``judged``)."""
    rows_without_pairs: int = 0
    """``pairs``: input rows judged by this run that gave no pair."""
    tie_breaks: int = 0
    """``pairs`` (best_vs_worst): rows whose all-equal grades were re-judged."""
    tie_rounds: int = 0
    """Temperature-1.0 re-grading rounds spent on those."""
    samples: int = 0
    """Judge samples generated (not those the store answered)."""
    parse_failures: int = 0
    """Samples (generated or stored) without a parseable verdict."""
    retried: int = 0
    """Re-sampling rounds spent on outputs without a verdict."""
    forced: int = 0
    """Verdicts read by forcing ``[RESULT]``."""
    prompt_tokens: int = 0
    """Judge prompt tokens sent to the backend."""
    completion_tokens: int = 0
    """Judge tokens generated."""
    stored_samples: int = 0
    """Judge samples the judgment store (``--store``) answered."""
    stored_prompt_tokens: int = 0
    """Prompt tokens of the requests the store answered (not sent)."""
    stored_completion_tokens: int = 0
    """Tokens of the outputs the store answered (not generated)."""
    batches: int = 0
    """Batches (part files) judged by this run."""
    output_rows: int = 0
    """Rows in the output when the run ended (all runs; pairs: pairs)."""
    seconds: float = 0.0
    """Wall time of the run, start-up and merge included."""
    workers: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per judge process (``local``, or a Ray actor ``host:pid``): rows, busy, io and idle seconds, rows/s busy."""

    def add(self, rec: dict[str, Any]) -> None:
        """Count one batch's record (``jobs.batch.judge_rows``) into the fields of its names."""
        self.batches += 1
        for f in dataclasses.fields(self):
            if f.name in rec and isinstance(getattr(self, f.name), int):
                setattr(self, f.name, getattr(self, f.name) + int(rec[f.name]))
        self.backend_error = self.backend_error or str(rec.get("backend_error") or "")
        missing = json.loads(rec.get("no_expected") or "{}")
        if missing and not self.no_expected:  # once a job
            logger.warning("%s: rows without an expected score: %s", self.job, next(iter(missing)))
        for counts, given in ((self.skipped, json.loads(rec.get("skipped") or "{}")), (self.no_expected, missing)):
            for k, v in given.items():
                counts[k] = counts.get(k, 0) + int(v)
        w = self.workers.setdefault(
            str(rec["worker"]), {"rows": 0, "seconds": 0.0, "io_seconds": 0.0, "idle_seconds": 0.0, "rows_per_s": 0.0}
        )
        w["rows"] += int(rec["rows"])
        for k in ("seconds", "io_seconds", "idle_seconds", "baseline_seconds"):
            if k in rec:
                w[k] = w.get(k, 0.0) + float(rec[k])
        w["rows_per_s"] = w["rows"] / w["seconds"] if w["seconds"] > 0 else 0.0

    def exit_code(self) -> int:
        """The job's exit status (``EXIT_CODES``)."""
        if self.backend_failed and self.backend_failed >= self.rows:
            return EXIT_JUDGE_DOWN
        return EXIT_SOME_FAILED if self.backend_failed else 0

    def text(self) -> str:
        """A few lines for a person."""
        rate = self.rows / self.seconds if self.seconds else 0.0
        lines = [
            f"{self.job}: {self.rows} rows ({self.resumed_rows} resumed) in {self.seconds:.1f} s "
            f"({rate:.2f} rows/s) -> {self.output} ({self.output_rows} rows)"
        ]
        if self.retried_rows or self.repaired_parts:
            lines.append(
                f"  judged again: {self.retried_rows} rows whose backend had failed, "
                f"{self.repaired_parts} half-written batches of a killed run"
            )
        what = "candidate pairs" if self.job == "pairs" else "rows"
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items()))
        lines.append(
            f"  {self.judged + self.failed + sum(self.skipped.values())} {what}: {self.judged} judged, {self.failed} "
            f"failed (see judge_error), {sum(self.skipped.values())} skipped" + (f" ({skipped})" if skipped else "")
        )
        lines.append(f"  {self.retried} re-sampling rounds, {self.forced} forced verdicts")
        lines += [f"  {n} rows without an expected score: {why}" for why, n in sorted(self.no_expected.items())]
        lines.append(
            f"  judge: {self.samples} samples ({self.parse_failures} without a parseable verdict), tokens "
            f"{self.prompt_tokens} prompt, {self.completion_tokens} generated"
        )
        if self.stored_samples:
            lines.append(
                f"  judgment store: {self.stored_samples} samples answered, tokens {self.stored_prompt_tokens} "
                f"prompt, {self.stored_completion_tokens} stored (not generated)"
            )
        if self.backend_failed:
            lines.append(
                f"  {self.backend_failed} {what} failed because the judge backend failed (judge_error "
                '"backend failed: ..."): run again with --resume to judge them again'
            )
        if self.job == "pairs":
            lines.append(f"  {self.pairs} pairs written, {self.rows_without_pairs} rows without a pair")
        if len(self.workers) > 1 or any(k != "local" for k in self.workers):
            for name, w in sorted(self.workers.items()):
                lines.append(f"  replica {name}: {int(w['rows'])} rows, {w['rows_per_s']:.2f} rows/s while judging")
        return "\n".join(lines)
