"""Training recipe for Prometheus-style judges: data, SFT and weight merging (issue 6)."""
