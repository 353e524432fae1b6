"""`python -m rlfit`: the command line."""

from rlfit.cli import run

run()
