"""`python -m tpuray.local.emulator launch --state-dir DIR --name NAME`: the detached launcher."""

import sys

from tpuray.local.emulator.launcher import main

sys.exit(main(sys.argv[1:]))
