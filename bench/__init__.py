"""`make bench` (`python -m bench`): the sizing engine's speed, the calibration tables and the
HTTP benchmark (`bench.http`). Not part of the shipped package or its wheel."""
