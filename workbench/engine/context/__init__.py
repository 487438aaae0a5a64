"""The context: the projection of transcript + overlay into what the model gets, the estimator and its
calibration, the budget, prices, attribution of proxied requests and compaction checkpoints.

"What the TUI shows is what the model gets" is built here, from the transcript layer below.
"""
