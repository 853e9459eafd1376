#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this):
# format check, clippy -D warnings, license policy, all tests and doc tests, and a short
# fuzz smoke run of every cargo-fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
FERROVS_NEED_OVS=1
. scripts/setup.sh

step() { say "$1"; shift; "$@"; }

if [ "$FERROVS_NIGHTLY" = 1 ]; then
    step "format check (nightly rustfmt)" cargo +nightly fmt --all -- --check
else
    echo "WARNING: no nightly toolchain: format check runs on stable rustfmt (unstable options ignored)"
    step "format check (stable rustfmt)" cargo fmt --all -- --check
fi
step "license policy (permissive only, see deny.toml)" python3 tools/check-licenses.py
step "clippy -D warnings" cargo clippy --workspace --all-targets --locked -- -D warnings
step "tests and doc tests" cargo test --workspace --locked
step "fuzz smoke run" scripts/fuzz-smoke.sh
say "all checks passed"
