"""`python -m runners.demo`: build the demo datasets (`runners.demo.build.main`)."""

import sys

from runners.demo.build import main

sys.exit(main())
