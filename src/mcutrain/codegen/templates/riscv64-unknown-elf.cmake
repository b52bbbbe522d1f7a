# CMake toolchain file: this library cross-compiled for @target@ (@core@) with the GNU RISC-V toolchain (picolibc).
#     cmake -B build -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-unknown-elf.cmake && cmake --build build
# The core flags are those of mcutrain's own cross builds (the ones its instruction counts measure);
# they change no result of the integer kernels. One section per function and object lets the
# firmware's link (-Wl,--gc-sections) drop the kernels this model does not call. The compiler has
# no C library of its own: picolibc's specs supply the headers (an ESP-IDF build uses its own).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv32)
set(CMAKE_C_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_ASM_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "@core_flags@ --specs=picolibc.specs")
set(CMAKE_ASM_FLAGS_INIT "@core_flags@")
set(CMAKE_EXE_LINKER_FLAGS_INIT "--specs=picolibc.specs -Wl,--gc-sections")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
