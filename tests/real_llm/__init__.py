"""Opt-in tests against a real model server."""
