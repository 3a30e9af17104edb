import sys

from worldgate.cli import main

sys.exit(main())
