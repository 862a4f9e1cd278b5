"""``python -m tvm_tirx``: the command line (see :mod:`tvm_tirx.cli`)."""

import sys

from tvm_tirx.cli import main

if __name__ == "__main__":
    sys.exit(main())
