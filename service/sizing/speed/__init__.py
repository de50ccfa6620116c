"""Speed: the roofline estimate of a replica (`performance`), its efficiencies fitted on
published measurements (`performance_fit`), and a replica's speed at a batch, held to latency
targets (`replica`)."""
