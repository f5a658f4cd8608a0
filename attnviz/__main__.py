"""`python -m attnviz profile ...` (attnviz.corpus.cli)."""

import sys

from .corpus.cli import main

sys.exit(main())
