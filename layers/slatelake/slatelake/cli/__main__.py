import sys

from slatelake.cli import main

sys.exit(main())
