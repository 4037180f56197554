"""The judge's text interface, byte for byte as each judge was trained: the judge-format seam (``judge_format``)
and its formats (``formats``), the Prometheus templates, rubrics and their resolution, rendering, verdict
parsing, the injection guard (``sanitize``) and how a prompt travels to a model (``wire``, ``conversation``).
Imports nothing of prom_reward but ``errors`` and ``registry``; importing it registers the built-in formats.
"""

from prom_reward.format import formats as formats
