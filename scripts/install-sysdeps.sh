#!/usr/bin/env bash
# Installs the system packages the test suite needs when running as root and they are missing:
# the ARM cross toolchain with newlib, QEMU for Cortex-M, CMake (the exported CMake builds), and
# Debian's Fashion-MNIST.
set -euo pipefail
need=()
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
command -v cmake >/dev/null || need+=(cmake)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "note: missing ${need[*]}; tests that need them will skip." >&2
    echo "      install with: sudo apt-get install -y --no-install-recommends ${need[*]}" >&2
    exit 0
fi
echo "installing ${need[*]} ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
