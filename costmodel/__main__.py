import sys

from costmodel.cli import catch_signals, main

catch_signals()  # at once (main installs them again, as when called as the console script)
sys.exit(main())
