"""The HTTP API: runs, the worker protocol, diagnostics and metrics, with its
OpenAPI document served at /openapi.json."""
