"""`python -m tpuray` is the `tpuray` command."""

import sys

from tpuray.cli import main

sys.exit(main())
