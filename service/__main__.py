"""`python -m service` is the `kvplan` command."""

from .cli import main

raise SystemExit(main())
