"""The judge report: one self-contained HTML page for a graded file (``prom-reward report``).

- ``summarize``: what a ``prom-reward grade`` or ``compare`` output file says (distributions, length
  correlation, failure reasons, per-rubric and per-source tables, the extreme rows).
- ``svg``: the plots, drawn as inline SVG (no plotting library, no network).
- ``html``: ``render_report(summary, probe=None)``, with a hacking-probe record's results when given.
"""
