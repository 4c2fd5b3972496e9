#!/usr/bin/env bash
# One command to start: on a fresh Debian 12 machine, as root, installs what the lab and the
# commands it prints need (apt, the list in scripts/packages.sh), builds headroom (release) and
# runs `headroom lab` with the arguments given:
#
#   scripts/lab.sh                      # 4 hosts at 1G
#   scripts/lab.sh --hosts 3 --monitor  # with a Prometheus scraping the switch
#   scripts/lab.sh down                 # remove the lab
#
# Rust itself (the version in rust-toolchain.toml) comes from rustup (https://rustup.rs); Debian
# 12's packaged Rust is too old to build headroom.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/lab.sh: the lab needs root (network namespaces, veth pairs, packet sockets): sudo $0 $*" >&2
    exit 2
fi
install_missing_packages "${HEADROOM_LAB_PACKAGES[@]}" "${HEADROOM_BUILD_PACKAGES[@]}"

if ! command -v cargo >/dev/null; then
    for dir in "${SUDO_USER:+$(getent passwd "$SUDO_USER" | cut -d: -f6)}" "$HOME"; do
        if [ -n "$dir" ] && [ -x "$dir/.cargo/bin/cargo" ]; then
            export PATH="$dir/.cargo/bin:$PATH"
            break
        fi
    done
fi
if ! command -v cargo >/dev/null; then
    echo "scripts/lab.sh: cargo not found. Install Rust with rustup (https://rustup.rs):" >&2
    echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
    echo "then run scripts/lab.sh again (rust-toolchain.toml picks the version)." >&2
    exit 1
fi

printf '\n==> cargo build --release -p headroom-cli\n'
cargo build --release --locked -p headroom-cli
exec target/release/headroom lab "$@"
