"""Meta-evaluation of Prometheus-style judges and performance measurements (see ``benchmarks/README.md``).

Modules: ``loaders`` (benchmark layouts), ``metrics`` (correlations, accuracies, agreement),
``meta_eval`` (the run and its record), ``report`` (markdown, versions), ``plots`` (PNG figures),
``judge_spec`` (a judge from a CLI spec), ``throughput``, ``tie_cost``, ``overhead``,
``client_overhead`` + ``noop_server`` (the OpenAI-compatible client at scale).
"""
