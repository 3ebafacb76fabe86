#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan+UBSan) into build-fuzz/ and
# runs each for a bounded time, starting from its seed corpus in tests/fuzz/corpus/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      default: 10 s each, every target
#   scripts/fuzz.sh --build-only                          build the targets, run nothing
# Targets run two at a time (FUZZ_JOBS=N for another number).
# New inputs go to build-fuzz/corpus/ (not the repository); a crash is written to
# build-fuzz/crashes/ and fails the run (exit 1), naming the target and the input.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=
if [[ "${1:-}" == --build-only ]]; then build_only=1; shift; fi
seconds="${1:-10}"
shift || true
./scripts/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DPOLITEPROXY_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j 2
[[ -n $build_only ]] && exit 0
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(request_head chunked_decoder origin_response origin_exchange target retry_after config http2_session http2_client redis_reply proxy_users robots_txt control_api dns_message)
fi
mkdir -p build-fuzz/crashes
# Two targets at a time, one per core; each writes its own log and corpus.
jobs="${FUZZ_JOBS:-2}"
run_target() {
  local t="$1" work="build-fuzz/corpus/$1" status=0
  mkdir -p "$work"
  build-fuzz/tests/fuzz/${t}_fuzz -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t-" "$work" "tests/fuzz/corpus/$t" \
    > "build-fuzz/$t.log" 2>&1 || status=$?
  echo "$status" > "build-fuzz/$t.status"
}
for t in "${targets[@]}"; do
  rm -f "build-fuzz/$t.status"
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  echo "fuzz: $t for ${seconds}s" >&2
  run_target "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do
  if [[ "$(cat "build-fuzz/$t.status" 2>/dev/null)" != 0 ]]; then
    failed+=("$t")
    echo "fuzz: $t FAILED; the input is in build-fuzz/crashes/, the log:" >&2
    tail -40 "build-fuzz/$t.log" >&2
  else
    echo -n "fuzz: $t: " >&2
    grep -E '^stat::number_of_executed_units|^Done' "build-fuzz/$t.log" | tr '\n' ' ' >&2
    echo >&2
  fi
done
[[ ${#failed[@]} -eq 0 ]] || { echo "fuzz: crashes in ${failed[*]}" >&2; exit 1; }
