#!/usr/bin/env bash
# Installs what building and testing ferrovs needs on a fresh Debian 12 machine (as root):
# Debian packages, a Rust toolchain (rustup) when cargo is missing or older than a crate's
# `rust-version`, the nightly toolchain
# (rustfmt's options and cargo-fuzz need it) and cargo-fuzz. Sourced by demo.sh and test.sh;
# safe to run again (it only installs what is missing).
set -euo pipefail

say() { printf '\n==> %s\n' "$*"; }

need_apt=()
for cmd_pkg in cc:build-essential pkg-config:pkg-config python3:python3 curl:curl git:git; do
    cmd=${cmd_pkg%%:*} pkg=${cmd_pkg##*:}
    command -v "$cmd" >/dev/null 2>&1 || need_apt+=("$pkg")
done
# The test command compares ferrovs with the real Open vSwitch (userspace, dummy datapath,
# no kernel module): it sets FERROVS_NEED_OVS=1.
if [ "${FERROVS_NEED_OVS:-0}" = 1 ] && ! command -v ovs-vswitchd >/dev/null 2>&1; then
    need_apt+=(openvswitch-switch)
fi
if ((${#need_apt[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: missing ${need_apt[*]}; run as root (or install them) first" >&2
        exit 1
    fi
    say "apt-get install ${need_apt[*]}"
    # Debian's openvswitch-switch tries to start system services on install; ferrovs starts
    # its reference OVS privately instead. Keep services from starting during the install
    # (only if the machine has no policy of its own), and remove the policy afterwards.
    own_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        own_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}"
    if [ "$own_policy" = 1 ]; then
        rm -f /usr/sbin/policy-rc.d
    fi
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
    say "installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal \
        --component rustfmt,clippy
    export PATH="$HOME/.cargo/bin:$PATH"
fi
# The highest `rust-version` of the workspace's crates: an older stable toolchain is updated if
# rustup manages it, and named otherwise.
root=$(dirname "${BASH_SOURCE[0]}")/..
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$root"/Cargo.toml "$root"/crates/*/Cargo.toml |
    sort -V | tail -n1)
have=$(rustc --version | sed -n 's/^rustc \([0-9]*\.[0-9]*\).*/\1/p')
if [ -n "$msrv" ] && [ -n "$have" ] &&
    [ "$(printf '%s\n%s\n' "$msrv" "$have" | sort -V | head -n1)" != "$msrv" ]; then
    if command -v rustup >/dev/null 2>&1; then
        say "updating the stable Rust toolchain (rustc $have, ferrovs needs $msrv)"
        rustup update stable --no-self-update
    else
        echo "setup: rustc $have is older than $msrv, which ferrovs needs; update it" >&2
        exit 1
    fi
fi

# Nightly: rustfmt.toml uses unstable options, and cargo-fuzz needs it. Without it the test
# command says so loudly and goes on with what stable can do.
FERROVS_NIGHTLY=0
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    FERROVS_NIGHTLY=1
elif rustup toolchain install nightly --profile minimal --component rustfmt >/dev/null 2>&1; then
    FERROVS_NIGHTLY=1
fi
if [ "$FERROVS_NIGHTLY" = 1 ] && ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rustfmt'; then
    rustup component add --toolchain nightly rustfmt >/dev/null 2>&1 || true
fi
export FERROVS_NIGHTLY
