"""How sure the judge was: token-entropy indicators of a judgment (``indicators``: SE, perplexity,
verdict probability, sample and swap agreement, SE-Cali) and the rules that route the least confident
items to a stronger judge (``routing``, used by ``core.cascade``).

Imports ``format`` and ``backends`` only.
"""
