"""Pictures of a capacity answer (SVG and PNG): one GPU's memory budget, capacity by context."""
