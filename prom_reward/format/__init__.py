"""The judge's text interface, byte for byte as Prometheus judges were trained: the prompt templates
(``templates``), score rubrics (``rubrics``) and their resolution per item (``resolve``), rendering
(``render``), verdict parsing (``parsing``, ``eos``), the injection guard (``sanitize``), and how a prompt
travels to a model (``wire``: chat template, literal ``[INST]``, raw; ``conversation``).

Imports nothing of prom_reward but ``errors`` and ``registry``; the spec it is tested against is
``docs/spec/``.
"""
