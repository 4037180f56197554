"""The judge report: one self-contained HTML page for a graded file (``prom-reward report``): what the file says
(``summarize``), its plots as inline SVG (``svg``) and the page (``html``).
"""
