"""Simulations: a deployment (a capacity question) under traffic (POST /v1/simulations, the
CLI's `kvplan simulate`): the pure simulator (`service.simulation`) behind one use case."""
