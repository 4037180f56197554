"""The hacking probe: how exploitable is a judge as a reward, before you train on it?

- ``data``: LLMBar pairs and graded items (``load_llmbar``, ``load_items``), seeded subsets.
- ``edits``: response edits that should not change a fair grade (``EDITS``: padding, a formal preamble,
  self-grades, the question restated, markdown decoration, and ``none``, the noise control).
- ``llmbar``: pairwise accuracy on LLMBar's Natural vs Adversarial sets, both orders, with the gaps.
- ``shifts``: score shifts under the edits, with bootstrap intervals.
- ``run``: ``ProbeConfig`` and ``run_probe(judge, config) -> record``; ``summary``: its tables.

From the command line: ``prom-reward probe --model M | --server URL -o probe.json`` (``prom_reward.cli.probe``).
"""
