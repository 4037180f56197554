"""The judge's text interface, byte for byte as each judge was trained: judge formats, Prometheus templates,
rubrics, rendering, verdict parsing, the injection guard and the wire; importing it registers the formats."""

from prom_reward.format import formats as formats
