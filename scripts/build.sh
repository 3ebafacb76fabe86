#!/usr/bin/env bash
# Configures and builds politeproxy into build/ (Release with debug info), 2 jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh "$@"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j 2
