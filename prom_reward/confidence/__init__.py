"""How sure the judge was: token-entropy indicators of a judgment (``indicators``: SE, perplexity, verdict
probability, sample and swap agreement, SE-Cali), which ``prom_reward.experimental``'s cascade routes by.
Imports ``format`` and ``backends`` only.
"""
