"""How sure the judge was: token-entropy indicators of a judgment (``indicators``: SE, perplexity, verdict
probability, sample and swap agreement, SE-Cali), which the cascade routes by. Imports ``backends`` only."""
