#!/usr/bin/env bash
# Builds crates/classifier/ovs-harness/ovs_cls.c (OVS 3.1's own classifier over a workload
# file written by `classifier-bench --with-ovs-cls`) against a built OVS source tree, with
# the tree's own compiler flags and link libraries, into target/ovs-cls.
#   scripts/build-ovs-harness.sh [OVS_TREE]   (default /tmp/pn-ovssrc/openvswitch)
# The tree is Debian's openvswitch-source built by scripts/build-ovstest.sh (it leaves
# lib/.libs/libopenvswitch.a), which this script runs first when the default tree is missing;
# the harness is not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=${1:-/tmp/pn-ovssrc/openvswitch}
out=target/ovs-cls

if [ $# -eq 0 ] && [ ! -f "$tree/lib/.libs/libopenvswitch.a" ]; then
    scripts/build-ovstest.sh "$(dirname "$tree")"
fi

if [ ! -f "$tree/config.h" ] || [ ! -f "$tree/lib/classifier.h" ]; then
    echo "build-ovs-harness: no configured OVS tree at $tree; build one first with" \
        "'scripts/build-ovstest.sh DIR' (the tree is DIR/openvswitch)" >&2
    exit 1
fi
if [ ! -f "$tree/lib/.libs/libopenvswitch.a" ]; then
    echo "build-ovs-harness: $tree/lib/.libs/libopenvswitch.a is missing; build it with" \
        "'scripts/build-ovstest.sh $(dirname "$tree")'" >&2
    exit 1
fi

# The tree's own flags and libraries, as its Makefile holds them (configure decides whether
# -lssl, -lcap-ng, -lunbound and the like are in LIBS).
var() { make -s -C "$tree" --no-print-directory --eval='print-%: ; @echo $($*)' "print-$1"; }
cflags="$(var CFLAGS) $(var AM_CFLAGS)"
libs=$(var LIBS)
# Built with AVX512 support, the library needs its companion archive.
extra=()
if [ -f "$tree/lib/.libs/libopenvswitchavx512.a" ]; then
    extra+=("$tree/lib/.libs/libopenvswitchavx512.a")
fi

mkdir -p target
# shellcheck disable=SC2086 # the flags are word lists
gcc $cflags -DHAVE_CONFIG_H -I "$tree" -I "$tree/include" -I "$tree/lib" \
    -o "$out" crates/classifier/ovs-harness/ovs_cls.c \
    "$tree/lib/.libs/libopenvswitch.a" "${extra[@]}" $libs -lpthread -lrt
echo "$out"
