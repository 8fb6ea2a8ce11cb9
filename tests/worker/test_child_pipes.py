"""A child's pipes are closed once, by its reader, whatever ends the child.

The reader thread is the one blocked on the child's pipe. When ``close`` also closed the
pipes, the two raced once the killed child's EOF woke the reader: a pipe closed twice
raised EBADF out of a worker's shutdown (the chaos soak's "SIGTERMed workers that did
not stop cleanly"), and a descriptor closed under a read may already be another file's.
"""

from __future__ import annotations

import threading

from echomq_django.engine.outcome import Success
from echomq_django.engine.worker.children import Child


def echo(claimed):  # the child's handler, imported by path
    return Success("null")


def test_closing_a_child_leaves_the_pipes_to_its_reader():
    for _ in range(25):
        child = Child(f"{__name__}:echo")
        child.start()
        process = child._process
        child.close()  # raised OSError(EBADF) now and then
        readers = [t for t in threading.enumerate() if t.name == "echomq-child-reader"]
        assert readers == []  # it ended the child's jobs and closed the pipes: then close returned
        assert process.conn.closed and process.stops.closed
        assert process.popen.returncode is not None


def test_a_child_never_started_closes_quietly():
    Child(f"{__name__}:echo").close()
