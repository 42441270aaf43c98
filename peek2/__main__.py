"""``python -m peek2``: the command line (kept uncompiled: compiled modules cannot run as __main__).

Ctrl-C while Python imports the package and the command line ends it quietly: the package's
``__init__`` lets the signal's default action end the process until here (see
``peek2._located_as_main``), as the ``peek2`` console script does.
"""

import signal
import sys

from peek2.cli import main

if signal.getsignal(signal.SIGINT) is signal.SIG_DFL:
    signal.signal(signal.SIGINT, signal.default_int_handler)
sys.exit(main())
