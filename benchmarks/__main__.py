"""`python -m benchmarks bench|profile`: the same commands as `chorus-bench` (benchmarks/cli.py)."""
import sys

from benchmarks.cli import main

sys.exit(main())
