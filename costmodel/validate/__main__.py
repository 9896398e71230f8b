"""``python -m costmodel.validate``."""

from costmodel.validate import main

raise SystemExit(main())
