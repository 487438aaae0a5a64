"""The context: what the model gets, and what it is estimated to cost.

The projector turns transcript + overlay + settings into the view's items, what is left out and why, and
the compaction pivots, with one immutable record per message; the estimator consumes those records and
nothing else (calibrated by the usage the API reported); the view builder composes the two. Around them:
the budget, prices, attribution of proxied requests and compaction checkpoints.

"What the TUI shows is what the model gets" is built here, from the transcript layer below.
"""
