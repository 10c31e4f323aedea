import sys

from toolscore.collector.cli import main

sys.exit(main())
