"""Prometheus metrics (declared once, `sluiceway_*`) and logging."""
