"""Demo URLs (empty for now: the demo's views are added here)."""

urlpatterns: list = []
