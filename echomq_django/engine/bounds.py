"""The engine's defaults and bounds, each written once.

Python is their single source: a script writes ``${NAME}`` where it needs one, and
``script.py`` puts the value there when it loads the script, so no Lua literal can
drift from these.
"""

from __future__ import annotations

SECOND_MS = 1000
DAY_MS = 24 * 3600 * SECOND_MS
WEEK_MS = 7 * DAY_MS

MIN_PRIORITY, MAX_PRIORITY = -100, 100
DEFAULT_MAX_ATTEMPTS = 3
MAX_ATTEMPTS = 1_000_000
DEFAULT_LEASE_MS = 30_000
DEFAULT_RESULT_TTL_MS = DAY_MS
DEFAULT_DEAD_TTL_MS = WEEK_MS
DEFAULT_MAX_PAYLOAD = 512 * 1024
MAX_LEASE_MS = WEEK_MS  # also the longest time limit of a job
# A job whose worker died while it ran alone this many times is dead (WorkerCrashed):
# two is bad luck (a deploy's SIGKILL, a host lost), three in a row is the job.
DEFAULT_CRASH_BUDGET = 3
MAX_CRASH_BUDGET = 1_000_000
MAX_TOKEN = 2**53 - 1  # a lease's token (its row's attempts): a Lua number holds it exactly
SWEEP_LIMIT = 1000  # jobs per reap/promote/trim call: no script blocks the server for long
SWEEP_MAX = 10_000  # the most a caller may ask per call (0 or less would mean "no bound" to Lua)
PAGE_MAX = 500
# A batched enqueue/complete script call carries at most this many jobs, and
# payloads/results of at most about this many bytes: its run time blocks the server.
BATCH_MAX = 500
BATCH_BYTES = 1 << 20
# The longest retention or retry delay (~34 years): now + it stays an exact integer that
# Lua's '%d' can format (a larger one wrapped to a negative score: due at once).
MAX_DELAY_MS = 2**40
MAX_DUE_MS = 2**52  # the latest absolute due time (Unix ms) a score holds exactly
ERROR_MAX_BYTES = 64 * 1024  # one error record; the worker's are bounded well below (outcome.py)
ROW_ERRORS_MAX_BYTES = 64 * 1024  # a row's errors array keeps the newest within this (common.lua)
THROUGHPUT_TTL_S = 2 * 3600  # how long a minute of the throughput chart is kept
THROUGHPUT_MAX_MINUTES = THROUGHPUT_TTL_S // 60  # the most Jobs.throughput can read back
