"""``python -m langchain_context_pipeline``: the command line."""

import sys

from langchain_context_pipeline.cli import main

sys.exit(main())
