#!/usr/bin/env bash
# Runs every cargo-fuzz target briefly (FUZZ_SECONDS each, default 20) on nightly, starting
# from the seeds in fuzz/corpus/. Installs cargo-fuzz when missing. Without nightly it says
# so in one line and skips (it never fails silently).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
secs=${FUZZ_SECONDS:-20}
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "FUZZ SMOKE SKIPPED: no nightly Rust toolchain (install with: rustup toolchain install nightly)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
for target in $(cargo +nightly fuzz list --fuzz-dir fuzz); do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    work=$(mktemp -d)
    cp -r "$corpus"/. "$work"/ 2>/dev/null || true
    echo "fuzz $target for ${secs}s"
    log=$(mktemp)
    if ! cargo +nightly fuzz run --fuzz-dir fuzz "$target" "$work" -- -max_total_time="$secs" >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "FUZZ SMOKE FAILED: $target (the crash input is under fuzz/artifacts/$target)"
        exit 1
    fi
    grep -E '^Done|#[0-9]+ *DONE' "$log" | tail -n 1 || tail -n 1 "$log"
    rm -f "$log"
    rm -rf "$work"
done
echo "fuzz smoke: all targets ran without a crash"
