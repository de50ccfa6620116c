"""Planning: searching GPUs and layouts for the cheapest plan (`planner`) and the
hand-checkable explanation of an answer (`explain`)."""
