#!/usr/bin/env bash
# Builds politeproxy and runs every test (unit and integration) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 120
