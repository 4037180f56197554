"""``python -m prom_reward.cli``: the ``prom-reward`` command."""

import sys

from prom_reward.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
