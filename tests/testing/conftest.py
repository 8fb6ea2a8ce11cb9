# userproject/ is a separate project with tests of its own, run in a subprocess by
# test_plugin.py as a user runs theirs: this suite must not collect them.
collect_ignore = ["userproject"]
