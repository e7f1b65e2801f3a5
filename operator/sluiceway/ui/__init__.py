"""The web UI at /ui: server-rendered pages over the same services, rules and
store functions as the HTTP API."""
