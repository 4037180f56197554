"""Forced verdicts and expected scores in every registered format: the exact text a cut output is
continued from (``forcing_body`` + ``force_prefix``) or None (re-sampled), through the real judge on a
scripted backend; the probabilities read over each format's verdict tokens; each format's verdict being
one token after its forcing text in the tokenizers we have; and the T=1 re-judging of ties in any format."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from prom_reward import OnlineDPOJudgeReward, PrometheusJudge
from prom_reward.backends.base import Completion, GenerationRequest, TokenLogprobs
from prom_reward.backends.scripted import ScriptedBackend
from prom_reward.core.sampler import forced_text, normalize_token
from prom_reward.format.judge_format import JUDGE_FORMATS, JudgeFormat, Task, get_judge_format
from prom_reward.format.rubrics import Rubric

FORCEABLE = [n for n in JUDGE_FORMATS.names() if JUDGE_FORMATS.get(n).force_prefix is not None]
R, RA, FB = " [RESULT] ", "<answer>[[", "<feedback>Accurate.</feedback>"

# format, cut output (finish reason "length") -> the assistant text the verdict is forced after, or None
CUTS: list[tuple[str, str, str | None]] = [
    ("prometheus2", "Clear and kind, but the second step", "Clear and kind, but the second step" + R),
    ("prometheus2", "Clear. [RESU", "Clear." + R),
    ("prometheus2", "Clear.\n[RESULT]", "Clear." + R),
    ("prometheus2", "Clear.</s>", "Clear." + R),
    ("prometheus2", "Clear. [RESULT] 7", None),
    ("m-prometheus", "Klar, aber der zweite Schritt", "Klar, aber der zweite Schritt" + R),
    ("flow-judge", "<feedback>Accurate, but the sec", "<feedback>Accurate, but the sec\n</feedback>\n<score>"),
    ("flow-judge", "<feedback>\nAccurate.\n</fee", "<feedback>\nAccurate.\n</feedback>\n<score>"),
    ("flow-judge", FB, FB + "\n<score>"),
    ("flow-judge", FB + "\n<sc", FB + "\n<score>"),
    ("flow-judge", FB + "\n<score>", FB + "\n<score>"),  # an open <score>: not written twice
    ("flow-judge", FB + "\n<score>\n", FB + "\n<score>"),
    ("flow-judge", FB + "\n<score>7", None),  # a score written: re-sampled
    ("flow-judge", FB + "\n<score>7</score>", None),
    ("flow-judge", FB + "\nFinal score:", None),  # text the parser refuses between the tags
    ("flow-judge", "<score>4", None),  # a score before any feedback
    (
        "flow-judge",
        "<feedback>It does not deserve a <score>5</score> since it",
        "<feedback>It does not deserve a <score>5</score> since it\n</feedback>\n<score>",
    ),
    ("flow-judge", "The answer is right but", "<feedback>\nThe answer is right but\n</feedback>\n<score>"),
    ("flow-judge-3", "<feedback>Mostly<|end|>", "<feedback>Mostly\n</feedback>\n<score>"),
    ("flow-judge-binary", "<feedback>Passes.", "<feedback>Passes.\n</feedback>\n<score>"),
    ("selene", "**Reasoning:** B cites a source, A does", "**Reasoning:** B cites a source, A does\n\n**Result:**"),
    ("selene", "**Reasoning:** B cites.\n\n**Res", "**Reasoning:** B cites.\n\n**Result:**"),
    ("selene", "**Reasoning:** B cites.\n\n**Result:** ", "**Reasoning:** B cites.\n\n**Result:**"),
    ("selene", "**Reasoning:** B is **better**", "**Reasoning:** B is **better**\n\n**Result:**"),
    ("selene", "**Reasoning:** B cites.\n\n**Result:** C", None),
    ("mt-bench-pairwise", "Assistant B is more accurate because", "Assistant B is more accurate because\n\n[["),
    ("mt-bench-pairwise", "B is right. My final verdict: [", "B is right. My final verdict:\n\n[["),
    ("mt-bench-pairwise", "B is right. My final verdict: [[", "B is right. My final verdict:\n\n[["),
    ("mt-bench-pairwise", 'Per "[[A]]" if A is better; here B', 'Per "[[A]]" if A is better; here B\n\n[['),
    ("mt-bench-pairwise", "B is right. [[A", None),  # cut inside a verdict
    ("mt-bench-pairwise", "It is not [[A]]", None),  # a verdict ends it (negated): re-sampled
    ("rise-judge", "回答B更准确，因为", "回答B更准确，因为\n\n[["),
    ("offsetbias", "", "Output ("),
    ("offsetbias", "Outp", "Output ("),
    ("offsetbias", '"Output', '"Output ('),
    ("offsetbias", "Output (c", None),
    ("offsetbias", "The better one is", None),  # the whole output must be the verdict
    (
        "rm-r1",
        "<type>Chat</type>\n\n<rubric>\n  Accuracy 60%\n  <justify>Facts matter",
        "<type>Chat</type>\n\n<rubric>\n  Accuracy 60%\n  <justify>Facts matter</justify>\n</rubric>\n\n" + RA,
    ),
    ("rm-r1", "<eval>\n  A says <quote_A>42", "<eval>\n  A says <quote_A>42</quote_A>\n</eval>\n\n" + RA),
    ("rm-r1", "<eval>\nB is right.\n</eval>\n\n<ans", "<eval>\nB is right.\n</eval>\n\n" + RA),
    ("rm-r1", "<eval>\nB is right.\n</eval>\n\n<answer>[[", "<eval>\nB is right.\n</eval>\n\n" + RA),
    ("rm-r1", "<eval>B.</eval>\n<answer>[[C", None),
    ("rm-r1-reasoning", "<think>\nA is wrong, so", "<think>\nA is wrong, so\n</think>\n\n" + RA),
    (
        "rm-r1-reasoning",
        "<think>draft <answer>[[A]]</answer> but no",  # an answer inside an open <think> is a draft
        "<think>draft <answer>[[A]]</answer> but no\n</think>\n\n" + RA,
    ),
    ("rm-r1-reasoning", "<think>ok</think>\n<answer>[[B]]</answer> wait", None),
]


def task_of(fmt: JudgeFormat) -> Task:
    return "absolute" if "absolute" in fmt.tasks else "relative"


def written(fmt: JudgeFormat, label: str) -> str:
    """The verdict token as the judge writes it after the forcing text (Selene's carries its space)."""
    return " " + label if fmt.name == "selene" else label


def test_the_table_covers_every_format_that_forces_and_con_j_forces_nothing():
    assert {name for name, _, _ in CUTS} == set(FORCEABLE)
    assert set(JUDGE_FORMATS.names()) - set(FORCEABLE) == {"con-j"}
    assert forced_text(get_judge_format("con-j"), "{") is None


@pytest.mark.parametrize("name, cut, sent", CUTS, ids=lambda v: repr(v)[:40])
def test_a_cut_output_is_forced_after_the_formats_own_text_or_resampled(name, cut, sent):
    fmt = get_judge_format(name)
    task = task_of(fmt)
    labels = fmt.verdict_labels(task)
    low, high = labels[-2:]  # the forced token is the last label; the one before has less mass
    top = {written(fmt, high): math.log(0.7), written(fmt, low): math.log(0.2), "x": math.log(0.1)}
    prefixes: list[str] = []

    def respond(req: GenerationRequest, i: int) -> Completion:
        if req.assistant_prefix:
            prefixes.append(req.assistant_prefix)
            token = written(fmt, high)
            return Completion(token, (TokenLogprobs(token, top[token], top),), "length", 1)
        return Completion(cut, None, "length", 30)

    judge = PrometheusJudge(backend=ScriptedBackend(respond=respond), format=fmt, max_retries=0, expected_score=True)
    if task == "absolute":
        (out,) = judge.grade(["q"], ["r"], Rubric("Right?", tuple(f"level {s}" for s in fmt.scale)))
    else:
        (out,) = judge.compare(["q"], ["x"], ["y"], Rubric("Better?"))
    (sample,) = out.samples
    assert forced_text(fmt, cut) == sent
    if sent is None:  # not forced: no forcing request, the output fails with the format's own reason
        assert prefixes == [] and sample.verdict is None and not sample.forced
        assert sample.reason is not None and sample.reason.startswith(name + ": ")
        return
    verdict = (lambda lab: int(lab)) if task == "absolute" else (lambda lab: "AB"[labels.index(lab)])
    assert prefixes == [sent] and sample.forced and sample.verdict == verdict(high)
    key = str if task == "absolute" else verdict  # a sample's absolute probabilities are keyed by label
    assert sample.probabilities == pytest.approx({key(low): 2 / 9, key(high): 7 / 9})
    completed = fmt.parse(sent + high + fmt.force_suffix, task)  # the forced text, closed, is a real verdict
    assert completed.verdict == verdict(high) and sample.feedback == (completed.feedback or None)
    if task == "absolute":
        assert out.expected_score == pytest.approx(int(low) * 2 / 9 + int(high) * 7 / 9)


@pytest.mark.parametrize("name", FORCEABLE)
def test_a_written_verdict_is_read_over_the_formats_tokens(name):
    """A complete output's verdict token: its top alternatives, written as the judge writes them, give the
    probabilities over the format's labels, keyed by verdict (no forcing)."""
    fmt = get_judge_format(name)
    task = task_of(fmt)
    labels = fmt.verdict_labels(task)
    low, high = labels[-2:]
    text = full_output(fmt, int(high) if task == "absolute" else "AB"[labels.index(high)])
    at = fmt.parse(text, task).verdict_start
    assert at is not None and text[at] == high
    top = {written(fmt, high): math.log(0.6), written(fmt, low): math.log(0.3), "x": math.log(0.1)}
    start = at + 1 - len(written(fmt, high))  # the verdict token as the judge writes it (Selene's: " B")
    assert text[start : at + 1] == written(fmt, high)
    tokens = (
        TokenLogprobs(text[:start], 0.0, {}),
        TokenLogprobs(text[start : at + 1], top[written(fmt, high)], top),
        TokenLogprobs(text[at + 1 :], 0.0, {}),
    )
    backend = ScriptedBackend(outputs=[Completion(text, tokens, "stop", 3)] * 2)
    judge = PrometheusJudge(backend=backend, format=fmt, expected_score=True, max_retries=0)
    if task == "absolute":
        (out,) = judge.grade(["q"], ["r"], Rubric("Right?", tuple(f"level {s}" for s in fmt.scale)))
        assert out.probabilities == pytest.approx({int(low): 1 / 3, int(high): 2 / 3})
    else:
        (out,) = judge.compare(["q"], ["x"], ["y"], Rubric("Better?"))
        assert out.samples[0].probabilities == pytest.approx({"AB"[labels.index(low)]: 1 / 3, "B": 2 / 3})
    assert not out.samples[0].forced and len(backend.calls) == 1


# -- one token after the forcing text, in the tokenizers we have -------------------------------------------
TYPICAL_CUT = {
    "prometheus2": "The response is accurate but",
    "m-prometheus": "The response is accurate but",
    "flow-judge": "<feedback>The response is accurate but",
    "flow-judge-3": "<feedback>The response is accurate but",
    "flow-judge-binary": "<feedback>The response is accurate but",
    "selene": "**Reasoning:** Response B is accurate but",
    "mt-bench-pairwise": "Assistant B is accurate but",
    "rise-judge": "回答B更准确，但是",
    "offsetbias": "Outp",
    "rm-r1": "<type>Chat</type>\n\n<eval>\n  B is accurate but",
    "rm-r1-reasoning": "<think>\nB is accurate but",
}
# (format, task) whose label is NOT one token after the forcing text in SmolLM2's byte-level BPE: the
# forcing text ends with a space, which that tokenizer merges into the letter (" A"); documented in
# docs/formats.md ("Forced verdicts").
MERGED_SPACE = {("prometheus2", "relative"), ("m-prometheus", "relative")}
TOKENIZERS = ["SmolLM2-135M-Instruct", "pocket-judge"]


@pytest.fixture(scope="module", params=TOKENIZERS)
def tokenizer(request):
    from transformers import AutoTokenizer

    path = Path.home() / ".cache" / "prom_reward" / request.param
    assert (path / "tokenizer.json").is_file(), f"{path} is missing: the test setup builds it"
    return AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("name, task", [(n, t) for n in FORCEABLE for t in sorted(JUDGE_FORMATS.get(n).tasks)], ids=str)
def test_each_verdict_token_is_one_token_after_the_forcing_text(tokenizer, name, task):
    fmt = get_judge_format(name)
    sent = forced_text(fmt, TYPICAL_CUT[name])
    assert sent is not None and sent.endswith(fmt.force_prefix or "")
    before = tokenizer.encode(sent, add_special_tokens=False)
    for label in fmt.verdict_labels(task):
        ids = tokenizer.encode(sent + written(fmt, label) + fmt.force_suffix, add_special_tokens=False)
        one_more = ids[: len(before)] == before and normalize_token(tokenizer.decode(ids[len(before)])) == label
        assert one_more == ((name, task) not in MERGED_SPACE), (label, [tokenizer.decode(i) for i in ids[-4:]])
        assert len(tokenizer.encode(label, add_special_tokens=False)) == 1  # the label itself is one token


# -- ties are re-judged at T=1 in any format ------------------------------------------------------------
def full_output(fmt: JudgeFormat, verdict: str | int) -> str:
    """A complete output of ``fmt`` with ``verdict`` (the forcing text of a short feedback, closed)."""
    if fmt.name == "con-j":
        return '{"原因": "更准确", "更好的回答": ' + str("AB".index(str(verdict)) + 1) + "}"
    label = str(verdict) if isinstance(verdict, int) else fmt.verdict_labels("relative")["AB".index(verdict)]
    sent = forced_text(fmt, "" if fmt.name == "offsetbias" else "Fine.") or ""
    return sent + written(fmt, label) + fmt.force_suffix


@pytest.mark.parametrize("name", [n for n in JUDGE_FORMATS.names() if "relative" in JUDGE_FORMATS.get(n).tasks])
def test_a_tied_pair_is_rejudged_at_temperature_one_in_its_format(name):
    """Round 0: a position-biased judge says A in both orders (a tie); the tie round (T=1) prefers GOOD."""
    fmt = get_judge_format(name)

    def respond(req: GenerationRequest, i: int) -> str:
        assert req.judge_format == name
        good_first = req.user.index("GOOD") < req.user.index("BAD")
        if req.sampling.temperature == 0.0:
            return full_output(fmt, "A")
        return full_output(fmt, "A" if good_first else "B")

    backend = ScriptedBackend(respond=respond)
    judge = PrometheusJudge(backend=backend, format=name, sampling={"temperature": 0.0}, max_retries=0)
    reward = OnlineDPOJudgeReward(judge)
    assert reward(prompts=["Q?", "Q?"], completions=["BAD 1", "GOOD 2"]) == [0.0, 1.0]
    assert [c[0].sampling.temperature for c in backend.calls] == [0.0, 1.0]
    assert reward.stats.tie_rounds == 1 and reward.stats.decided_after_ties == 1


@pytest.mark.parametrize("name", [n for n in JUDGE_FORMATS.names() if "absolute" in JUDGE_FORMATS.get(n).tasks])
def test_tied_grades_are_regraded_at_temperature_one_in_its_format(name):
    fmt = get_judge_format(name)
    low, high = fmt.scale[0], fmt.scale[-1]

    def respond(req: GenerationRequest, i: int) -> str:
        if req.sampling.temperature == 0.0:
            return full_output(fmt, low)  # round 0: equal grades
        return full_output(fmt, high if "GOOD" in req.user else low)

    backend = ScriptedBackend(respond=respond)
    judge = PrometheusJudge(backend=backend, format=name, sampling={"temperature": 0.0})
    rubric = Rubric("Right?", tuple(f"level {s}" for s in fmt.scale))
    (v,) = judge.compare_by_grades(["q"], ["BAD"], ["GOOD"], rubric)
    assert v.winner == "B" and v.tie_rounds == 1 and not v.tie
    assert [c[0].sampling.temperature for c in backend.calls] == [0.0, 1.0]
