import sys

from nodeagent.cli import main

sys.exit(main())
