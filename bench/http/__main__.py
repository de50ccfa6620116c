"""`python -m bench.http`: the HTTP benchmark alone (`make bench` runs it last)."""

from .cli import options_from
from .run import run

run(options_from())
