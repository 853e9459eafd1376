#!/usr/bin/env bash
# Builds OVS 3.1's `ovstest` (for `classifier-bench --with-ovs`) and its `libopenvswitch.a`
# (for the classifier harness, scripts/build-ovs-harness.sh) from Debian's own source package,
# openvswitch-source: the same tree as Debian's OVS binaries, which ship neither. At idle
# priority; a tree already configured or built is reused.
#   scripts/build-ovstest.sh [DIR]   (default /tmp/pn-ovssrc)
#     -> DIR/openvswitch/tests/ovstest, DIR/openvswitch/lib/.libs/libopenvswitch.a
# Then e.g.: DIR/openvswitch/tests/ovstest test-classifier benchmark 1000 16 16 1 1000000
set -euo pipefail
dir=${1:-/tmp/pn-ovssrc}
if ! dpkg -s openvswitch-source >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y openvswitch-source gcc make
fi
mkdir -p "$dir"
cd "$dir"
[ -d openvswitch ] || tar xzf /usr/src/openvswitch/openvswitch.tar.gz
cd openvswitch
idle() { chrt -i 0 nice -n 19 "$@"; }
if [ ! -e config.status ]; then
    idle ./configure --disable-ssl --disable-libcapng >../configure.log 2>&1
fi
# The generated headers first: a bare `make tests/ovstest` does not build BUILT_SOURCES.
built=$(make --no-print-directory --eval='print-%: ; @echo $($*)' print-BUILT_SOURCES)
# shellcheck disable=SC2086 # a list of targets
idle make -j2 $built >../make.log 2>&1
idle make -j2 tests/ovstest lib/libopenvswitch.la >>../make.log 2>&1
ls -l tests/ovstest lib/.libs/libopenvswitch.a
