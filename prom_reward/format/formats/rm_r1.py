"""RM-R1's reasoning judges (``rm-r1``, ``rm-r1-reasoning``): their evaluation prompts, and a strict parser of
the last ``<answer>[[A]]</answer>`` (docs/formats.md)."""

from __future__ import annotations

import re

from prom_reward.format.eos import drop_cut_marker, drop_cut_tag, open_tags, strip_eos
from prom_reward.format.formats.pairwise_only import PairwiseOnlyFormat, failure, header_lines, paragraph, verdict_end
from prom_reward.format.judge_format import JUDGE_FORMATS
from prom_reward.format.parsing import ParsedOutput

_QUOTE_TAGS = (
    "<quote_A>...</quote_A> or <summary_A>...</summary_A>, and <quote_B>...</quote_B>, or <summary_B>...</summary_B>"
)
_ANSWER_FORMAT = "<answer>[[A]]</answer> or <answer>[[B]]</answer>"
RM_R1_SYSTEM = f"""Please act as an impartial judge and evaluate the quality of the responses provided by two AI Chatbots to the Client's question displayed below.

First, classify the task into one of two categories: <type>Reasoning</type> or <type>Chat</type>.
- Use <type>Reasoning</type> for tasks that involve math, coding, or require domain knowledge, multi-step inference, logical deduction, or combining information to reach a conclusion.
- Use <type>Chat</type> for tasks that involve open-ended or factual conversation, stylistic rewrites, safety questions, or general helpfulness requests without deep reasoning.

If the task is Reasoning:
1. Solve the Client's question yourself and present your final answer within <solution>...</solution> tags.
2. Evaluate the two Chatbot responses based on correctness, completeness, and reasoning quality, referencing your own solution.
3. Include your evaluation inside <eval>...</eval> tags, quoting or summarizing the Chatbots using the following tags:
   - <quote_A>...</quote_A> for direct quotes from Chatbot A
   - <summary_A>...</summary_A> for paraphrases of Chatbot A
   - <quote_B>...</quote_B> for direct quotes from Chatbot B
   - <summary_B>...</summary_B> for paraphrases of Chatbot B
4. End with your final judgment in the format: {_ANSWER_FORMAT}

If the task is Chat:
1. Generate evaluation criteria (rubric) tailored to the Client's question and context, enclosed in <rubric>...</rubric> tags.
2. Assign weights to each rubric item based on their relative importance.
3. Inside <rubric>, include a <justify>...</justify> section explaining why you chose those rubric criteria and weights.
4. Compare both Chatbot responses according to the rubric.
5. Provide your evaluation inside <eval>...</eval> tags, using <quote_A>, <summary_A>, <quote_B>, and <summary_B> as described above.
6. End with your final judgment in the format: {_ANSWER_FORMAT}

Important Notes:
- Be objective and base your evaluation only on the content of the responses.
- Do not let response order, length, or Chatbot names affect your judgment.
- Follow the response format strictly depending on the task type.

Your output must follow one of the two formats below:

For Reasoning:
<type>Reasoning</type>

<solution> your own solution for the problem </solution>

<eval>
  include direct comparisons supported by {_QUOTE_TAGS}
</eval>

<answer>[[A/B]]</answer>

For Chat:
<type>Chat</type>

<rubric>
  detailed rubric items
  <justify> justification for the rubric </justify>
</rubric>

<eval>
  include direct comparisons supported by {_QUOTE_TAGS} tags
</eval>

<answer>[[A/B]]</answer>"""  # noqa: E501
RM_R1_PROMPT = (
    "[Client Question]\n{instruction}\n\n"
    "[The Start of Chatbot A's Response]\n{response_a}\n[The End of Chatbot A's Response]\n\n"
    "[The Start of Chatbot B's Response]\n{response_b}\n[The End of Chatbot B's Response]"
)
RM_R1_REASONING_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI Chatbots "
    "to the Client question displayed below. \n\n"
    + RM_R1_PROMPT
    + "\n\nOutput your final verdict at last by strictly following this format: "
    "'<answer>[[A]]</answer>' if Chatbot A is better, or '<answer>[[B]]</answer>' if Chatbot B is better."
)

_ANSWER_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
_ANSWER_BODY = re.compile(r"\s*\[\[\s*(?P<v>[AB])\s*\]\]\s*")
_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
# The tags of RM-R1's outputs: blocks close on their own line ("...\n</eval>"), the others inline.
_BLOCKS = ("think", "rubric", "eval", "solution")
_INLINE = ("type", "justify", "quote_A", "summary_A", "quote_B", "summary_B")


def _last(pattern: re.Pattern[str], text: str, start: int, end: int) -> re.Match[str] | None:
    found = list(pattern.finditer(text, start, end))
    return found[-1] if found else None


class RMR1Format(PairwiseOnlyFormat):
    """RM-R1: Qwen2.5-Instruct-based models (``rm-r1``: system ``RM_R1_SYSTEM``, user ``RM_R1_PROMPT``) by default."""

    force_prefix, force_suffix = "<answer>[[", "]]</answer>"
    markers = (
        *(t for tag in ("answer", "eval", "rubric", "think") for t in (f"<{tag}>", f"</{tag}>")),
        "[[A]]",
        "[[B]]",
        "[[",  # the parser reads "[[ B ]]" (and "< answer >", "<ANSWER>") too
        *header_lines(RM_R1_PROMPT),
    )

    def __init__(self, name: str = "rm-r1", system: str = RM_R1_SYSTEM, template: str = RM_R1_PROMPT) -> None:
        self.name, self.system, self.template = name, system, template

    def parse_relative(self, text: str) -> ParsedOutput:
        end = verdict_end(text)
        think_open, think_close = _last(_THINK_OPEN, text, 0, end), _last(_THINK_CLOSE, text, 0, end)
        if think_open is not None and (think_close is None or think_close.start() < think_open.start()):
            return failure(text[:end].strip(), f"{self.name}: the <think> block is not closed (no verdict after it)")
        start = think_close.end() if think_close is not None else 0
        opened = _last(_ANSWER_OPEN, text, start, end)
        if opened is None:
            return failure(text[start:end].strip(), f"{self.name}: no {_ANSWER_FORMAT} at the end of the output")
        feedback = text[start : opened.start()].strip()
        closed = _ANSWER_CLOSE.search(text, opened.end(), end)
        if closed is None:
            return failure(feedback, f"{self.name}: the last <answer> tag is not closed (expected {_ANSWER_FORMAT})")
        if closed.end() != end:
            tail = text[closed.end() : end].strip()
            return failure(feedback, f"{self.name}: text follows the last </answer> ({tail[:40]!r})")
        found = _ANSWER_BODY.fullmatch(text, opened.end(), closed.start())
        if found is None:
            got = text[opened.end() : closed.start()].strip()
            return failure(feedback, f"{self.name}: the last <answer> holds {got[:40]!r}, expected [[A]] or [[B]]")
        return ParsedOutput(feedback, found["v"], found.start("v"))

    def forcing_body(self, text: str) -> str | None:
        """The output with its open tags closed as RM-R1 writes them, a cut ``<answer>[[`` dropped, and a blank line;
        None when it wrote an ``<answer>`` outside an open ``<think>`` (re-sampled).

        >>> RM_R1.forcing_body("<eval>\\nA says <quote_A>42")
        '<eval>\\nA says <quote_A>42</quote_A>\\n</eval>\\n\\n'
        """
        body = strip_eos(text)
        cut = drop_cut_marker(body, self.force_prefix)
        body = drop_cut_tag(body if cut is None else cut)
        still_open = open_tags(body, _BLOCKS + _INLINE)
        if "think" not in still_open:
            think = _last(_THINK_CLOSE, body, 0, len(body))
            if _ANSWER_OPEN.search(body, think.end() if think else 0):
                return None
        for tag in reversed(still_open):
            body = body.rstrip() + ("\n" if tag in _BLOCKS else "") + f"</{tag}>"
        return paragraph(body)


RM_R1 = JUDGE_FORMATS.register("rm-r1", RMR1Format())
RM_R1_REASONING = JUDGE_FORMATS.register("rm-r1-reasoning", RMR1Format("rm-r1-reasoning", "", RM_R1_REASONING_PROMPT))
"""RM-R1's DeepSeek-distilled models: no system message, user ``RM_R1_REASONING_PROMPT``."""
