"""The built-in judge formats, one module each; importing this package registers them in ``JUDGE_FORMATS``."""

from prom_reward.format.formats import con_j, flow_judge, from_yaml, pairwise, prometheus2, rm_r1

__all__ = ["con_j", "flow_judge", "from_yaml", "pairwise", "prometheus2", "rm_r1"]
