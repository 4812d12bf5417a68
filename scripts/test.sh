#!/usr/bin/env bash
# Installs, builds and runs the whole test suite (what CI runs; docs/TESTING.md):
#  1. Release build (GCC; the CUDA backend compiled when nvcc exists; GPU
#     tests skip without a GPU and say so) and every test.
#  2. One clang sanitizer build (CPU backend) with AddressSanitizer +
#     UndefinedBehaviorSanitizer + libFuzzer coverage: the unit, integration
#     and fuzz tests; each fuzz target fuzzes for PAGODA_FUZZ_SECONDS (20)
#     from its corpus (tests/fuzz/).
#  3. A ThreadSanitizer build of the server alone (clang): the integration
#     tests that load the engine thread and the network threads, run by
#     stage 2's test binary against this server (PAGODA_TEST_SERVER_BIN).
# PAGODA_TEST_STAGES picks stages: "release sanitize tsan" by default (CI).
# Each stage's wall time is printed at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="$(nproc)"
stages="${PAGODA_TEST_STAGES:-release sanitize tsan}"
fuzz_seconds="${PAGODA_FUZZ_SECONDS:-20}"
timings=()
has_stage() { [[ " $stages " == *" $1 "* ]]; }
stage_done() { timings+=("$1: $(($(date +%s) - $2)) s"); }

# Sanitizer builds: clang (libFuzzer and its coverage instrumentation need
# it), -O1 (ASan's recommendation; much faster to compile than -O2) with
# line tables only (symbolized stack traces without full debug info).
san_flags=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo
           "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DPAGODA_CUDA=OFF)

if has_stage release; then
  echo "== Release build and tests =="
  t0=$(date +%s)
  "$root/scripts/build.sh" "$root/build"
  (cd "$root/build" && ctest --output-on-failure -j "$jobs")
  stage_done release "$t0"
fi

if has_stage sanitize || has_stage tsan; then
  echo "== ASan + UBSan + libFuzzer build (clang, CPU backend) =="
  t0=$(date +%s)
  "$root/scripts/build.sh" "$root/build-san" "${san_flags[@]}" -DPAGODA_SANITIZE=ON -DPAGODA_FUZZ=ON \
    "-DPAGODA_FUZZ_SECONDS=$fuzz_seconds"
  stage_done sanitize-build "$t0"
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if has_stage sanitize; then
  echo "== ASan + UBSan: unit, integration and fuzz tests =="
  t0=$(date +%s)
  (cd "$root/build-san" && ctest --output-on-failure -j "$jobs" -LE fuzz)
  stage_done sanitize-tests "$t0"
  # The fuzz targets after the others, so their CPU load does not overlap
  # the timing-sensitive integration tests.
  echo "== libFuzzer targets (${fuzz_seconds} s each) =="
  t0=$(date +%s)
  (cd "$root/build-san" && ctest --output-on-failure -j "$jobs" -L fuzz)
  stage_done fuzz "$t0"
fi

if has_stage tsan; then
  echo "== ThreadSanitizer: the server under the concurrency integration tests =="
  t0=$(date +%s)
  PAGODA_BUILD_TARGET=pagoda "$root/scripts/build.sh" "$root/build-tsan" "${san_flags[@]}" -DPAGODA_TSAN=ON \
    -DPAGODA_BUILD_TESTS=OFF
  stage_done tsan-build "$t0"
  t0=$(date +%s)
  # halt_on_error: the first race ends the server with exitcode 66, which the
  # tests' clean-shutdown check reports. Suppressions: third-party false
  # positives only (the file says why each is there).
  export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp"
  # Engine thread + network threads under load: many concurrent HTTP/SSE and
  # WebSocket streams, cancels, disconnects, resumes, SIGTERM with streams
  # open. Tests that assert wall-clock bounds (a TSan server is 5-15x
  # slower) are left to the other stages.
  # Also: the preprocessing pool and batched aborts (ServeBoundedInput), the
  # drain and the signal thread (ServeShutdownTimeout), accept back-off and
  # --max-connections.
  tsan_tests='^(ServeConcurrency|ServeWebSocket|ServeWebSocketPipeline|ServeShutdown|ServeShutdownTimeout|ServeBoundedInput|ServeConnectionLimits)\.'
  # These assert wall-clock bounds (< 1 s; a 30 MB body within 10 s).
  tsan_skip='ACloseFrameAbortsAtOnceEvenWhenTheClientNoLongerReads|ThirtyMegabyte'
  (cd "$root/build-san" && PAGODA_TEST_SERVER_BIN="$root/build-tsan/pagoda" \
    ctest --output-on-failure -j "$jobs" -R "$tsan_tests" -E "$tsan_skip")
  stage_done tsan-tests "$t0"
fi

printf '== stage times ==\n'
printf '  %s\n' "${timings[@]}"
