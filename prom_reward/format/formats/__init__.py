"""The judge formats, one module each; importing this package registers them in ``JUDGE_FORMATS``.

Each module defines its formats on the seam of ``prom_reward.format.judge_format`` (prompts, strict
parser, verdict tokens, forcing prefix, markers) and registers them under their names.
"""

from prom_reward.format.formats import flow_judge  # noqa: F401
