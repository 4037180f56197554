"""The judge's text interface, byte for byte as each judge was trained: the judge-format seam
(``judge_format``: prompts, parser, verdict tokens and forcing prefix as one object) and its formats
(``formats``: one module per format, Prometheus 2 the default), the Prometheus templates (``templates``),
score rubrics (``rubrics``) and their resolution per item (``resolve``), rendering (``render``), verdict
parsing (``parsing``, ``eos``), the injection guard (``sanitize``), and how a prompt travels to a model
(``wire``: chat template, literal ``[INST]``, raw; ``conversation``).

Imports nothing of prom_reward but ``errors`` and ``registry``; the spec it is tested against is
``docs/spec/``. Importing it registers the built-in judge formats.
"""

from prom_reward.format import formats as formats
