# The Debian 12 packages headroom's scripts install, in one place: sourced by scripts/lab.sh
# (the lab and the commands it prints) and scripts/test.sh (every check). Not executable.
#
# Each entry is a package name; `install_missing_packages NAME...` installs those not yet
# installed (as root, non-interactively) and says which.

# What `headroom lab` and the commands it prints use: ip and nstat (iproute2), ping, iperf3,
# tcpdump, tshark (to read captures), ethtool, chrt/setpriv (util-linux), pgrep/ps (procps),
# and Prometheus for `headroom lab --monitor`.
HEADROOM_LAB_PACKAGES=(
    iproute2 iputils-ping iperf3 tcpdump tshark ethtool procps util-linux prometheus
)

# What building headroom needs besides Rust itself (a C toolchain for linking), and the font
# `headroom sim` draws the text of its PNG plots in.
HEADROOM_BUILD_PACKAGES=(
    gcc libc6-dev pkg-config fonts-dejavu-core
)

# What the whole test suite needs on top: the DPDK backend and its bindings, kernel modules,
# helper scripts, the DCBX/LLDP peers of the LLDP agent tests, FRR (BGP in every switch of
# `headroom lab fabric`).
HEADROOM_TEST_PACKAGES=(
    kmod coreutils
    libdpdk-dev dpdk-dev clang libclang-dev
    python3 jq
    lldpad lldpd
    frr
)

install_missing_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    ((${#missing[@]})) || return 0
    printf '\n==> installing apt packages: %s\n' "${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        echo "need root to install ${missing[*]} (apt-get install ${missing[*]})" >&2
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer for it.
    echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
