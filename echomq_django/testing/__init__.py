"""Testing code that enqueues tasks: the pytest plugin and what its fixture gives a test.

The plugin is installed with the package (the ``pytest11`` entry point ``echomq``,
module :mod:`echomq_django.testing.plugin`); see docs/testing.md. The fixture's
types are in :mod:`echomq_django.testing.queues`. Nothing is imported here: pytest
loads the plugin before Django is set up.
"""
