import sys

from compass_server.cli import main

sys.exit(main())
