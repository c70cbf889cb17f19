"""``python -m dhik``: the command-line interface."""

from .app.cli import main

raise SystemExit(main())
