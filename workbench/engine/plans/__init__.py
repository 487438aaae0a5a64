"""Plans: every change to a context is a plan (strategies, compaction, recovery), measured before it is
applied, applied in one transaction, undone as a whole, listed in one history. One type (``plan.Plan``), one
measure (``measure.measure``), one write (``measure.commit``); a compaction's preview holds its plan.
"""
