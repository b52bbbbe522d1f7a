#!/usr/bin/env bash
# Installs the system packages the demo and the test suite need when running as root and they
# are missing: the ARM cross toolchain with newlib, QEMU for Cortex-M, the RISC-V cross toolchain
# with picolibc and QEMU for riscv32 (qemu-system-misc), CMake (the exported CMake builds), and
# Debian's Fashion-MNIST. Without root (or apt-get) it prints the one command that
# installs them.
# Usage: install-sysdeps.sh [demo|tests]   (who needs them: only the note's wording differs)
set -euo pipefail
for_what=${1:-tests}
need=()
command -v arm-none-eabi-gcc >/dev/null || need+=(gcc-arm-none-eabi libnewlib-arm-none-eabi)
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
# the RISC-V compiler comes without a C library: picolibc is a package of its own
if ! command -v riscv64-unknown-elf-gcc >/dev/null; then
    need+=(gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf)
elif [ ! -f /usr/lib/picolibc/riscv64-unknown-elf/picolibc.specs ]; then
    need+=(picolibc-riscv64-unknown-elf)
fi
command -v qemu-system-riscv32 >/dev/null || need+=(qemu-system-misc)
command -v cmake >/dev/null || need+=(cmake)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    if [ "$for_what" = demo ]; then
        echo "note: missing ${need[*]}; the demo runs without them and says which stage it" >&2
        echo "      leaves out. For the whole demo, run once:" >&2
    else
        echo "note: missing ${need[*]}; tests that need them will skip. Install them with:" >&2
    fi
    echo "      sudo apt-get install -y --no-install-recommends ${need[*]}" >&2
    exit 0
fi
if [ "$for_what" = demo ]; then who="the demo needs them"; else who="the tests need them"; fi
echo "installing ${need[*]} ($who) ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
