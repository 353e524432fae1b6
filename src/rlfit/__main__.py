"""`python -m rlfit`: the command line."""

from rlfit.cli import main

raise SystemExit(main())
