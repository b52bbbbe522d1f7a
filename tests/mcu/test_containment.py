"""Generated programs run contained: QEMU guests and host harnesses reach only the files handed to them.

programs/hostile.c does what injected C could do through semihosting: SYS_SYSTEM (a host shell
command) and SYS_OPEN of a host path outside the run directory. Neither may have any effect,
while the program's own handed files keep working. The private run directories are removed
after success, failure, timeout and SIGTERM/Ctrl-C. A hostile host harness (a constructor that
runs before main) cannot write outside its directory (root: it runs as nobody), see the
caller's environment, or reach a socket on the host's loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from mcutrain.contain import host_prefix, is_root, namespace_prefix
from mcutrain.mcu.hostbuild import HostBuildError
from mcutrain.mcu.hostrun import run_host
from mcutrain.mcu.qemu import QemuSandboxError, QemuTimeoutError, run_elf
from mcutrain.mcu.toolchain import build

from .conftest import PROGRAMS

CORE = "cortex-m4"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a host gcc")


@pytest.fixture(scope="module")
def hostile_elf(arm_tools, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile")
    return build([PROGRAMS / "hostile.c"], CORE, out / "hostile.elf").elf


@pytest.fixture(scope="module")
def spin_elf(arm_tools, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spin")
    (out / "spin.c").write_text("int main(void)\n{\n    for (;;) {\n    }\n}\n")
    return build([out / "spin.c"], CORE, out / "spin.elf").elf


@pytest.fixture
def own_tmp(tmp_path, monkeypatch) -> Path:
    """A temp root of this test only, so leftover run directories are counted exactly."""
    root = tmp_path / "tmproot"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _run_hostile(elf: Path, run_dir: Path, mode: str, arg: str):
    """Hand the program its argument file; returns the RunResult or the QemuSandboxError."""
    (run_dir / "arg.txt").write_text(arg + "\n")
    try:
        return run_elf(elf, CORE, [mode, "arg.txt", "out.txt"], cwd=run_dir, timeout=30)
    except QemuSandboxError as e:
        return e


def test_runs_have_every_layer_this_machine_allows(hostile_elf, tmp_path):
    r = _run_hostile(hostile_elf, tmp_path, "open", "out2.txt")
    assert r.exit_code == 0 and (tmp_path / "out2.txt").read_text() == "pwned"  # a handed path works
    assert "seccomp" in r.containment
    if is_root() or "--user" in namespace_prefix():
        assert "chroot" in r.containment
    if namespace_prefix():
        assert "netns" in r.containment


@pytest.mark.parametrize("relative", [True, False])
def test_semihosting_system_runs_no_host_command(hostile_elf, tmp_path, relative):
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    canary = "CANARY" if relative else str(outside / "CANARY")
    r = _run_hostile(hostile_elf, run_dir, "system", f"touch {canary}")
    assert not (run_dir / "CANARY").exists() and not (outside / "CANARY").exists()
    if isinstance(r, QemuSandboxError):  # seccomp killed QEMU at the fork of system()
        assert "forbidden operation" in str(r)
    else:                                # no seccomp here: chroot leaves no shell to run
        assert r.exit_code == 0 and (run_dir / "out.txt").read_text() != "result=0\n"


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_semihosting_open_cannot_write_outside_the_run_dir(hostile_elf, tmp_path, how):
    if not (is_root() or "--user" in namespace_prefix()):
        pytest.skip("no chroot without root or a user namespace (docs/security.md)")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    path = str(victim) if how == "absolute" else "../victim.txt"
    r = _run_hostile(hostile_elf, run_dir, "open", path)
    assert r.exit_code == 0, r.stdout
    assert victim.read_text() == "original"
    if how == "absolute":   # /tmp/... does not exist inside the chroot: the open fails
        assert (run_dir / "out.txt").read_text() == "result=-1\n"   # the handed output still works
        assert sorted(p.name for p in run_dir.iterdir()) == ["arg.txt", "out.txt"]
    else:                   # '..' of the chroot's root is the root: the file lands in the run dir
        assert (run_dir / "victim.txt").read_text() == "pwned"


def test_private_run_dir_is_removed_after_success_failure_and_timeout(hostile_elf, spin_elf, own_tmp):
    r = run_elf(hostile_elf, CORE, ["system", "missing.txt", "out.txt"], timeout=30)
    assert r.exit_code == 3 and "cannot read missing.txt" in r.stdout   # failure, in an empty dir
    assert list(own_tmp.iterdir()) == []
    with pytest.raises(QemuTimeoutError):
        run_elf(spin_elf, CORE, timeout=1)
    assert list(own_tmp.iterdir()) == []


def _pids_with_cwd(path: Path) -> list[int]:
    """Processes whose working directory is `path` (QEMU's, even chrooted, is the run dir)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if Path(os.readlink(p / "cwd")) == path:
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


# The child takes Ctrl-C as a terminal gives it: a job started in the background of a
# non-interactive shell (as a CI runner may start the suite) inherits SIGINT ignored, and its
# Python children would then never see the signal.
INTERRUPTED = """\
import signal, sys, tempfile
signal.signal(signal.SIGINT, signal.default_int_handler)
tempfile.tempdir = sys.argv[2]
from mcutrain.mcu.qemu import run_elf
run_elf(sys.argv[1], "cortex-m4", timeout=120)
"""


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc to find QEMU")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupt_kills_qemu_and_removes_the_run_dir(spin_elf, tmp_path, sig):
    root = tmp_path / "tmproot"
    root.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    qemu: list[int] = []
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(spin_elf), str(root)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not qemu and time.monotonic() < deadline:
            time.sleep(0.2)
            dirs = list(root.iterdir())
            qemu = _pids_with_cwd(dirs[0].resolve()) if dirs else []
        assert qemu, "QEMU did not start"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()
        for pid in qemu if sys.exc_info()[0] else ():   # a failed run must not leave QEMU spinning
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert list(root.iterdir()) == []
    time.sleep(0.2)
    assert not any(Path(f"/proc/{pid}").exists() and "qemu" in Path(f"/proc/{pid}/comm").read_text()
                   for pid in qemu)


# ---- host harness -------------------------------------------------------------------------

HOSTILE_HARNESS_C = """\
/* A 'harness' whose constructor does what injected C could: writes a host file, runs a command,
 * reads the caller's environment, connects to the host's loopback. It then writes one byte per
 * attempt (1 = it worked) as the 'logits' of the single 4-byte sample in in.bin. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static signed char worked[4];

__attribute__((constructor)) static void attack(void)
{
    FILE *f = fopen(VICTIM, "w");
    struct sockaddr_in a = {0};
    int s = socket(AF_INET, SOCK_STREAM, 0);
    worked[0] = f != NULL && fputs("pwned", f) >= 0;
    if (f != NULL) {
        fclose(f);
    }
    worked[1] = system("touch " CANARY) == 0;
    worked[2] = getenv("MT_TEST_SECRET") != NULL;
    a.sin_family = AF_INET;
    a.sin_port = htons(PORT);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    worked[3] = s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
}

int main(int argc, char **argv)
{
    FILE *out;
    if (argc < 3 || (out = fopen(argv[2], "wb")) == NULL) {
        return 2;
    }
    fwrite(worked, 1, sizeof(worked), out);
    fclose(out);
    return EXIT_CODE;
}
"""


def _hostile_harness(tmp_path: Path, victim: Path, canary: Path, port: int, exit_code: int = 0) -> Path:
    src, exe = tmp_path / "hostile_harness.c", tmp_path / "hostile_harness"
    src.write_text(HOSTILE_HARNESS_C)
    defines = [f'-DVICTIM="{victim}"', f'-DCANARY="{canary}"', f"-DPORT={port}", f"-DEXIT_CODE={exit_code}"]
    subprocess.run(["gcc", "-O1", *defines, str(src), "-o", str(exe)], check=True)
    return exe


@pytest.fixture
def listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    s.setblocking(False)
    yield s
    s.close()


@needs_gcc
def test_host_harness_is_contained(tmp_path, own_tmp, listener, monkeypatch):
    if not host_prefix():
        pytest.skip("neither a network namespace nor a privilege drop is possible here")
    monkeypatch.setenv("MT_TEST_SECRET", "1")
    victim, canary = tmp_path / "victim.txt", tmp_path / "CANARY"
    victim.write_text("original")
    exe = _hostile_harness(tmp_path, victim, canary, listener.getsockname()[1])
    logits, _ = run_host(exe, np.zeros((1, 4), np.int8), num_classes=4)
    worked = dict(zip(["write", "system", "environment", "network"], logits[0].tolist()))
    assert worked["environment"] == 0
    if "--net" in host_prefix():
        assert worked["network"] == 0
        with pytest.raises(BlockingIOError):
            listener.accept()
    if "setpriv" in host_prefix():   # root: the harness runs as nobody in its own directory
        assert worked["write"] == 0 and worked["system"] == 0
        assert victim.read_text() == "original" and not canary.exists()
    assert list(own_tmp.iterdir()) == []


@needs_gcc
def test_host_harness_dir_is_removed_after_failure_and_timeout(tmp_path, own_tmp, listener):
    exe = _hostile_harness(tmp_path, tmp_path / "v", tmp_path / "c", listener.getsockname()[1], exit_code=5)
    with pytest.raises(HostBuildError, match="exited with 5"):
        run_host(exe, np.zeros((1, 4), np.int8), num_classes=4)
    assert list(own_tmp.iterdir()) == []
    spin = tmp_path / "spin.c"
    spin.write_text("int main(void)\n{\n    for (;;) {\n    }\n}\n")
    subprocess.run(["gcc", str(spin), "-o", str(tmp_path / "spin")], check=True)
    with pytest.raises(HostBuildError, match="did not exit within 1 s"):
        run_host(tmp_path / "spin", np.zeros((1, 4), np.int8), num_classes=4, timeout=1)
    assert list(own_tmp.iterdir()) == []
