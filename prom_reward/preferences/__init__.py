"""DPO preference pairs from judge verdicts: the options (``config``), the input rows and their checks (``rows``)
and the strategies that turn a batch of rows into pairs and skip records (``strategies``). Imports ``core``
and below."""
