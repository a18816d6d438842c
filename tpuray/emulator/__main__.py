"""`python -m tpuray.emulator launch --state-dir DIR --name NAME`: the detached launcher."""

import sys

from tpuray.emulator.launcher import main

sys.exit(main(sys.argv[1:]))
