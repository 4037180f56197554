"""DPO preference pairs from judge verdicts: the options (``config``), the input rows and their checks
(``rows``) and the strategies that turn a batch of rows into pairs and skip records (``strategies``:
best vs worst through grades, all pairs through swapped comparisons). The jobs engine runs them
(``prom_reward.jobs.pairs``, ``prom_reward.jobs.preference_dataset``).

Imports ``core`` and below.
"""
