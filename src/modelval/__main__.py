import sys

from modelval.cli import main

sys.exit(main())
