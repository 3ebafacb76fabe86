#!/usr/bin/env bash
# Builds politeproxy and runs every test (unit and integration) with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
# -j2: the tests that may share the machine run two at a time; the rest alone
# (tests/integration/CMakeLists.txt, RUN_SERIAL).
ctest --test-dir build --output-on-failure --timeout 120 -j2
