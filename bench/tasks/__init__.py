"""No-op task definitions loaded by the peers' worker processes.

Every task does the same bookkeeping through :mod:`bench.tasks.probe`, so the
only difference between the peers is the queue library itself.
"""
