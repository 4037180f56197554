"""The hacking probe: how exploitable is a judge as a reward, before you train on it? Its inputs (``data``), the
response edits (``edits``), LLMBar accuracy (``llmbar``), score shifts (``shifts``), the run (``run``) and its
tables (``summary``); ``prom-reward probe`` runs it (docs/hacking.md).
"""
