"""``python -m peek2``: the command line (kept uncompiled: compiled modules cannot run as __main__)."""

import sys

from peek2.cli import main

sys.exit(main())
