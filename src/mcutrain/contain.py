"""Run generated programs (QEMU guests, host harness builds) contained: private directory, no network.

Generated C comes from model files, and a model file is untrusted input: a name that slipped
through escaping, or a hand-edited library, is code that runs on this machine. These helpers are
the defence in depth around every such run (docs/security.md, "Running generated code contained"):

- `private_dir`: a fresh `mkdtemp` directory (mode 0700) that is removed on success, failure,
  timeout, Ctrl-C and SIGTERM;
- `run_contained`: the child runs in a process group of its own, which is killed as a whole on
  timeout or interrupt, so no grandchild outlives the run;
- `namespace_prefix`: `unshare` of a network namespace (and, when not root, a user namespace),
  probed once; where the kernel or container refuses, the run goes ahead without it and
  `Containment.notes` says so;
- `drop_privileges_prefix`: when root, `setpriv` to the unprivileged `nobody` user.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

NOBODY = "nobody"
KEEP_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")
"""Variables a scrubbed environment keeps: the sanitizer settings a developer may have chosen."""


class ContainmentWarning(UserWarning):
    """A containment layer is not available here; the run goes ahead with the others."""


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@functools.cache
def _works(prefix: tuple[str, ...]) -> bool:
    """Whether `prefix true` runs here: kernels and containers differ in what they allow."""
    if not prefix or shutil.which(prefix[0]) is None:
        return False
    try:
        r = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@functools.cache
def warn_once(message: str) -> None:
    warnings.warn(message, ContainmentWarning, stacklevel=3)


def namespace_prefix(user: bool | None = None) -> tuple[str, ...]:
    """The `unshare` words that give the child an empty network namespace, or () if impossible.

    Root gets a plain network namespace. Anyone else needs a user namespace first
    (`--map-root-user`: the child is root only inside it, which is also what lets QEMU's
    `-chroot` work unprivileged). `user=True` forces the user namespace (tests of the
    unprivileged path). Refused namespaces (a container without CAP_SYS_ADMIN, a kernel with
    unprivileged user namespaces switched off) fall back to the next option, then to none.
    """
    candidates: list[tuple[str, ...]] = []
    if is_root() and not user:
        candidates.append(("unshare", "--net"))
    candidates.append(("unshare", "--user", "--map-root-user", "--net"))
    for c in candidates:
        if _works(c):
            return c
    warn_once("mcutrain: cannot create a network namespace here (unshare refused); generated programs "
               "run with the host's network. Allow user namespaces (sysctl "
               "kernel.unprivileged_userns_clone=1) or run as root to cut it off.")
    return ()


def drop_privileges_prefix() -> tuple[str, ...]:
    """When root: `setpriv` words that run the child as `nobody` (no groups, no new privileges).

    The host harness is an ordinary dynamically linked program (the sanitizers need their
    runtime), so it cannot be chrooted cheaply; running it as `nobody` keeps it from writing
    the host's files and reading root-only ones. () when not root (already unprivileged) or
    when setpriv/nobody are missing.
    """
    if not is_root():
        return ()
    try:
        pw = pwd.getpwnam(NOBODY)
    except KeyError:
        warn_once("mcutrain: no 'nobody' user; the host harness runs as root")
        return ()
    prefix = ("setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--no-new-privs")
    if not _works(prefix):
        warn_once("mcutrain: setpriv cannot drop to 'nobody' here; the host harness runs as root")
        return ()
    return prefix


def give_to_nobody(path: Path) -> None:
    """Hand a private run directory (and what is in it) to `nobody`, who runs the harness."""
    pw = pwd.getpwnam(NOBODY)
    for p in [path, *path.rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid, follow_symlinks=False)


def scrubbed_env(home: Path) -> dict[str, str]:
    """The environment of a contained child: a fixed PATH and locale, HOME/TMPDIR in its run dir.

    Nothing else of the caller's environment (tokens, proxies, LD_PRELOAD) reaches generated
    code, except the sanitizer options in `KEEP_ENV`.
    """
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(home), "TMPDIR": str(home)}
    env.update({k: os.environ[k] for k in KEEP_ENV if k in os.environ})
    return env


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM into SystemExit while a run is active, so `finally` blocks clean up.

    Python's default SIGTERM action ends the process at once, leaving temporary directories and
    QEMU children behind. Only the main thread may set handlers; elsewhere nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):  # someone else handles it already
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def private_dir(prefix: str) -> Iterator[Path]:
    """A new directory only this user can enter (mkdtemp, 0700), removed however the block ends."""
    with _sigterm_raises():
        path = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (the child may have forked) and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def run_contained(cmd: Sequence[str], *, cwd: str | Path | None, timeout: float,
                  env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `cmd` in its own session and process group; output captured as bytes.

    On timeout the group is killed and `subprocess.TimeoutExpired` (with the output so far) is
    raised; on KeyboardInterrupt, SIGTERM (see `_sigterm_raises`) or any other exception the
    group is killed before the exception goes on.
    """
    with _sigterm_raises():
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=None if env is None else dict(env),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(proc.args, timeout, out, err) from None
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def host_prefix() -> tuple[str, ...]:
    """The words in front of a host-built program: network namespace, then (root) `nobody`.

    A user namespace and the drop to `nobody` do not combine (`nobody` is not mapped inside
    it), so the drop happens only under a plain network namespace or none.
    """
    ns = namespace_prefix()
    if "--user" in ns:
        return ns
    return (*ns, *drop_privileges_prefix())


def run_program(exe: str | Path, args: Sequence[str], run_dir: Path,
                timeout: float) -> subprocess.CompletedProcess:
    """Run a host-built program on the files already in `run_dir` (a `private_dir`), contained.

    The program is copied into `run_dir` so that, run as `nobody`, it needs nothing outside it
    but the system's shared libraries; `args` name files relative to `run_dir`. The environment
    is scrubbed, the network is an empty namespace where the kernel allows one, and the process
    group is killed on timeout or interrupt (`run_contained`).
    """
    local = run_dir / "program"
    shutil.copy2(exe, local)
    prefix = host_prefix()
    if "setpriv" in prefix:
        give_to_nobody(run_dir)
    resolved = (shutil.which(prefix[0]) or prefix[0], *prefix[1:]) if prefix else ()
    return run_contained([*resolved, "./program", *args], cwd=run_dir, timeout=timeout,
                         env=scrubbed_env(run_dir))
