"""Integration tests: real servers on loopback, real agents, spawned workers."""
