import sys

from costmodel.cli import module_main

sys.exit(module_main())
