"""Settings: the leaf setting sections and the one ``Config`` that aggregates them, the model limits table.

The bottom layer: it imports nothing else from the engine but the shared errors.
"""
