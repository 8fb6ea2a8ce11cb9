"""The engine: the leased state machine on Redis/Valkey, with no Django imports.

Layers, arrows down only::

    worker / reaper
        scheduler   (periodic schedules on the server: sync, fire, pause, resume, run now)
        schedules   (what a schedule is and when it ticks: pure, cron + zones + catch-up)
        jobs        (the leased state machine API: one script call per operation)
        connector   (EVALSHA first, SCRIPT LOAD on NOSCRIPT, typed errors)
        script      (scripts/*.lua, one file per transition, SHA1 computed once)
        keyspace    (key names, hash tag, queue-name and job-id validation)
"""
