"""prom-reward benchmarks: judge meta-evaluation and performance measurements (see README.md)."""
