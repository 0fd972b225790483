"""Unit tests: offline, no server."""
