"""Plans: every change to a context is a plan (strategies, compaction, recovery), measured before it is
applied, applied in one transaction, undone as a whole, listed in one history.
"""
