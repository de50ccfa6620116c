"""The traffic simulator's place: pure like `service.sizing`, beside it.

A simulation replays requests (arrivals, prompt and output lengths) against the capacity and
speed that `service.sizing` answers, and reports queues and latencies over time. Like sizing it
imports no web, database or I/O, and reads sizing only through its facade; the slices reach it
through a use case of their own (tests/test_layers.py holds both rules). Empty until the issue
that builds the simulator.
"""
