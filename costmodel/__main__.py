import sys

from costmodel.cli import process_main

sys.exit(process_main())
