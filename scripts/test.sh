#!/usr/bin/env bash
# The one command that runs every check of headroom on a fresh Debian 12 machine.
#
# 1. Installs what the machine lacks (apt packages, cargo tools), non-interactively and idempotently.
# 2. Runs formatting, clippy (with and without DPDK), rustdoc (no broken links), every test
#    (unit, property, conformance, DPDK, root/namespace end-to-end), and a bounded fuzz smoke run.
#
# Tests that need root, network namespaces, tshark or DPDK run here: CI runs as root. A missing tool is
# installed, never skipped. Set HEADROOM_TEST_QUICK=1 to skip the fuzz smoke run during development.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n==> %s\n' "$*"; }

# A one-shot run gains nothing from incremental compilation state, which would add about as much
# to target/ as the build itself (1.7 GiB measured). The disk is shared: CI once failed with
# "No space left on device" in the fuzz build, so say how much room there is before starting.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
say "disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free here; a clean run writes about 2.5 GiB"

# --- 1. what the machine needs ------------------------------------------------------------------
apt_packages=(
    tshark tcpdump iproute2 iperf3 ethtool procps kmod   # lab and conformance tests
    iputils-ping util-linux coreutils                    # ping, chrt/setpriv, nice in the lab tests
    libdpdk-dev dpdk-dev pkg-config clang libclang-dev   # the DPDK backend and its bindings
    prometheus                                           # promtool, to check our metrics exposition
    python3 jq                                           # helper scripts
    lldpad lldpd                                         # DCBX/LLDP peers of the LLDP agent tests
    frr                                                  # BGP in every switch of `headroom lab fabric`
)
missing=()
for p in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    say "installing apt packages: ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "scripts/test.sh: need root to install ${missing[*]} (and to run the namespace tests)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer for it.
    echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

for tool in cargo rustc tshark tcpdump ip pkg-config ping iperf3 ethtool chrt setpriv nstat promtool lldpad lldptool lldpd lldpcli unshare vtysh; do
    command -v "$tool" >/dev/null || { echo "scripts/test.sh: $tool is still missing after install" >&2; exit 1; }
done
pkg-config --atleast-version=22.11 libdpdk || { echo "scripts/test.sh: DPDK >= 22.11 not found by pkg-config (libdpdk-dev)" >&2; exit 1; }

# --- 2. static checks ----------------------------------------------------------------------------
say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy (default features)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# --- 3. tests ------------------------------------------------------------------------------------
say "cargo doc (workspace, no broken intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

say "cargo test (workspace, default features)"
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked --no-fail-fast
    # nextest does not run doctests.
    cargo test --workspace --locked --doc
else
    cargo test --workspace --locked --no-fail-fast
fi

# --- 3b. DPDK (cargo feature `dpdk`) --------------------------------------------------------------
# The crates that have a `dpdk` feature, built against the system DPDK (libdpdk-dev, installed
# above): clippy, then their tests. The DPDK tests start EAL without hugepages (--no-huge) and
# put vdevs (net_null, net_ring, net_af_packet, net_af_xdp) on veth pairs in network namespaces:
# they need root, which CI has, and fail rather than skip without it. Each test file is its own
# process with its own EAL and --file-prefix.
dpdk_crates=(headroom-dpdk-sys headroom-dpdk headroom-runtime headroom-cli)
for crate in "${dpdk_crates[@]}"; do
    say "cargo clippy -p $crate --features dpdk"
    cargo clippy -p "$crate" --features dpdk --all-targets --locked -- -D warnings
done
for crate in headroom-dpdk-sys headroom-dpdk headroom-runtime; do
    say "cargo test -p $crate --features dpdk"
    cargo test -p "$crate" --features dpdk --locked --no-fail-fast
done
# The binary's end-to-end suite already ran above on AF_PACKET; with DPDK, the lab on vdevs.
say "cargo test -p headroom-cli --features dpdk --test lab_dpdk"
cargo test -p headroom-cli --features dpdk --locked --no-fail-fast --test lab_dpdk

# --- 4. fuzz smoke -------------------------------------------------------------------------------
if [ "${HEADROOM_TEST_QUICK:-0}" != 1 ] && [ -x scripts/fuzz-smoke.sh ]; then
    say "fuzz smoke run"
    scripts/fuzz-smoke.sh
fi

say "all checks passed"
