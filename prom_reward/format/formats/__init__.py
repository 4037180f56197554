"""The registered judge formats, one module each; importing this package registers them all in
``prom_reward.format.judge_format.JUDGE_FORMATS``."""

import prom_reward.format.formats.con_j  # noqa: F401  (registers con-j)
import prom_reward.format.formats.pairwise  # noqa: F401  (registers selene, mt-bench-pairwise, offsetbias, rise-judge)
import prom_reward.format.formats.rm_r1  # noqa: F401  (registers rm-r1, rm-r1-reasoning)
