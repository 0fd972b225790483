#!/usr/bin/env bash
# Run a command; PostgreSQL support is added by a later step.
set -euo pipefail
exec "$@"
