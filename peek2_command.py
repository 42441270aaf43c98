"""The ``peek2`` console script: Ctrl-C while Python imports peek2 ends the command quietly.

Importing ``peek2.cli`` imports the package and its engine (about 50 ms). ``peek2.cli.main``
turns Ctrl-C into one line and status 130, but a Ctrl-C during those imports came before it and
printed a traceback. This module lives outside the package so that importing it imports nothing
of peek2: the signal's default action ends the process during the imports (status 130 in a shell,
no traceback), as it does inside an encode call. What remains is Python's own start before this
module runs (the ``site`` imports, about 30 ms), as for any Python command.
"""

import signal


def main() -> int:
    # Only Python's own Ctrl-C handler is replaced: a SIGINT ignored by whoever started the
    # command (``cmd &`` in a script, a supervisor) stays ignored (it ended the command; a bug hunt).
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        from peek2.cli import main as cli_main
    except MemoryError:  # (as peek2.cli.main says it, for the imports)
        import sys

        print("peek2: out of memory (is a limit such as ulimit -v set?)", file=sys.stderr)
        return 1

    if previous is signal.default_int_handler:
        signal.signal(signal.SIGINT, previous)
    return cli_main()


if __name__ == "__main__":  # (``python peek2_command.py ...`` did nothing; a bug hunt)
    raise SystemExit(main())
