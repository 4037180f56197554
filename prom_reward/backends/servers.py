"""Dedicated judge servers: vLLM OpenAI-compatible servers as subprocesses, one per GPU group
(``JudgeServers``, ``ServeConfig``), health-checked at start and stopped on exit."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prom_reward.backends.vllm_options import ENGINE_FLAGS, SERVER_MODULE, VLLMOptions, check_engine_allowed
from prom_reward.declared import check, setting
from prom_reward.errors import BackendError, ConfigError


@dataclass(frozen=True)
class ServeConfig:
    """How to launch the judge servers: where (GPUs, ports) and the engine each runs (``engine``)."""

    model: str = setting(
        help="Hub id or local folder of the judge (``prom-reward serve`` resolves a preset name to it first).",
        nonempty=True,
    )
    engine: VLLMOptions = setting(
        factory=VLLMOptions,
        help="Each replica's engine (``tensor_parallel_size`` = GPUs per replica, ``gpu_memory_utilization``, "
        "``max_model_len`` ...): the same options, and the same flags, as an in-process ``VLLMEngine``.",
    )
    gpus: tuple[int, ...] = setting(
        (), help="GPU ids for the judge, e.g. 4,5,6,7 (as nvidia-smi lists them); none: one replica without CUDA."
    )
    replicas: int | None = setting(
        None,
        help="Number of servers; None (auto): as many as the GPUs allow (GPUs / tensor_parallel_size), or 1.",
        ge=1,
        none_is="auto",
    )
    port: int = setting(8100, help="Port of the first replica; replica i listens on port + i.", ge=1, le=65535)
    host: str = setting("127.0.0.1", help="Bind address (loopback unless you mean to expose the judge).", nonempty=True)
    log_dir: str = setting(
        "judge-logs", help="Folder of the servers' logs, one judge-<port>-<pid>.log each.", nonempty=True
    )
    startup_timeout: float = setting(1800.0, help="Seconds to wait for every server to answer /health.", gt=0)
    extra_args: tuple[str, ...] = setting(
        factory=tuple, help="More ``api_server`` arguments, passed through (not those ``engine`` sets)."
    )

    def __post_init__(self) -> None:
        check(self)
        tp, gpus, tps = self.engine.tensor_parallel_size, list(self.gpus), ("tensor_parallel_size",)
        if len(gpus) % tp:
            raise ConfigError(
                f"{len(gpus)} GPUs {gpus} cannot be split into groups of {{tensor_parallel_size}} {tp}; fix: give a "
                f"multiple of {tp} GPUs",
                "gpus",
                tps,
            )
        if len(set(gpus)) != len(gpus):
            raise ConfigError(f"lists a GPU twice: {gpus}; fix: give each GPU once", "gpus")
        most = len(gpus) // tp if gpus else 1
        if self.replicas is not None and self.replicas > most:
            raise ConfigError(
                f"expected 1..{most} ({len(gpus) or 'no'} GPUs with {{tensor_parallel_size}} {tp} allow that many), "
                f"got {self.replicas}; fix: give more GPUs or fewer replicas",
                "replicas",
                tps,
            )
        flags = {flag for _, flag in ENGINE_FLAGS} | {"--no-" + flag[2:] for _, flag in ENGINE_FLAGS}
        taken = sorted({a.split("=", 1)[0] for a in self.extra_args} & (flags | {"--host", "--port"}))
        if taken:
            raise ConfigError(
                f"sets {taken}, which ServeConfig sets itself; fix: use its fields (engine=VLLMOptions(...), host, "
                "port) instead",
                "extra_args",
            )

    def gpu_groups(self) -> list[tuple[int, ...]]:
        """The GPUs of each replica (one empty group on a CPU machine)."""
        if not self.gpus:
            return [()]
        tp = self.engine.tensor_parallel_size
        groups = [tuple(self.gpus[i : i + tp]) for i in range(0, len(self.gpus), tp)]
        return groups[: self.replicas or len(groups)]

    def urls(self) -> list[str]:
        """Base URLs (``.../v1``) of the replicas, in order."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return [f"http://{host}:{self.port + i}/v1" for i in range(len(self.gpu_groups()))]

    def command(self, model_path: str, index: int) -> list[str]:
        """The ``api_server`` command line of replica ``index`` (engine flags from ``VLLMOptions.server_args``;
        eager on vLLM's CPU build unless ``engine.enforce_eager`` says otherwise)."""
        from prom_reward.local.models import vllm_is_cpu_build

        engine = self.engine.for_cpu() if not self.gpus and vllm_is_cpu_build() else self.engine
        return [
            sys.executable,
            "-m",
            SERVER_MODULE,
            *engine.server_args(model_path),
            "--host",
            self.host,
            "--port",
            str(self.port + index),
            *self.extra_args,
        ]


class JudgeServers:
    """Start, health-check and stop the judge servers of a ``ServeConfig`` (a context manager)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log_paths: list[Path] = []

    @property
    def urls(self) -> list[str]:
        return self.config.urls()

    def start(self) -> list[str]:
        """Start every replica (its log ``judge-<port>-<pid>.log``), wait until each answers, return their URLs."""
        model, groups = self.config.model, self.config.gpu_groups()
        ports = [self.config.port + i for i in range(len(groups))]
        for port in ports:
            check_port_free(self.config.host, port)
        log_dir = Path(self.config.log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        for i, (group, port) in enumerate(zip(groups, ports, strict=True)):
            env = {"PYTHONUNBUFFERED": "1", **os.environ}  # unbuffered: a killed server's log keeps its last lines
            if group:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in group)
            else:
                from prom_reward.local.models import apply_cpu_defaults

                apply_cpu_defaults(env)
            command = self.config.command(model, i)
            if SERVER_MODULE in command:
                check_engine_allowed(f"a vLLM judge server for {model!r}")
            path = log_dir / f"judge-{port}-{os.getpid()}.log"
            with open(path, "xb") as log:  # a new file: never another server's log
                options: dict[str, Any] = dict(stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
                self.procs.append(subprocess.Popen(command, **options, preexec_fn=term_with_parent))
            self.log_paths.append(path)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self.urls

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.config.startup_timeout
        pending, wait = set(range(len(self.procs))), 0.1  # polled every 0.1 s at first, every 1 s from 0.8 s on
        while pending:
            for i in sorted(pending):
                proc, url = self.procs[i], self.urls[i]
                if proc.poll() is not None:
                    tail = self.log_paths[i].read_text(errors="replace")[-2000:]
                    raise BackendError(
                        f"judge server {i} ({url}) exited with code {proc.returncode} while starting; "
                        f"log {self.log_paths[i]}:\n{tail}"
                    )
                healthy = _answers_health(url[: -len("/v1")] + "/health")
                # ready only when the answer comes from this server, not from whatever else took the port
                if healthy and listens(proc.pid, self.config.port + i) is not False:
                    pending.discard(i)
            if pending and time.monotonic() > deadline:
                raise BackendError(
                    f"judge servers {[self.urls[i] for i in sorted(pending)]} did not answer /health "
                    f"within {self.config.startup_timeout:.0f}s; see their logs: "
                    + ", ".join(str(self.log_paths[i]) for i in sorted(pending))
                )
            if pending:
                time.sleep(wait)
                wait = min(1.0, 2 * wait)

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM every server (its whole process group), SIGKILL what is left after ``grace`` seconds."""
        for proc in self.procs:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs = []

    def __enter__(self) -> list[str]:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def term_with_parent() -> None:
    """In a child between fork and exec: have Linux SIGTERM it when its parent dies (elsewhere a no-op)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def check_port_free(host: str, port: int) -> None:
    """``ConfigError`` naming ``port`` when it is taken or cannot be bound, or ``host`` when not this machine's."""
    if not 0 < port < 65536:
        raise ConfigError(f"expected an int in [1, 65535], got {port}; fix: give a port in [1, 65535]", "port")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no conflict
        try:
            sock.bind((host, port))
        except OSError as e:
            if isinstance(e, socket.gaierror) or e.errno == errno.EADDRNOTAVAIL:  # the host, not the port
                raise ConfigError(
                    f"{host!r} is not an address of this machine ({e.strerror}); nothing was started; fix: give "
                    "an address or name of this machine (default 127.0.0.1; 0.0.0.0 for every interface)",
                    "host",
                ) from None
            if e.errno != errno.EADDRINUSE:  # e.g. a port below 1024 without root
                raise ConfigError(
                    f"port {port} on {host}: cannot listen there ({e.strerror}); nothing was started; fix: give "
                    "another {port} (1024 or above)",
                    mentions=("port",),
                ) from None
            raise ConfigError(
                f"port {port} on {host} is already in use ({e.strerror}); nothing was started; fix: stop what "
                "listens there or give another {port}",
                mentions=("port",),
            ) from None


def listens(session: int, port: int) -> bool | None:
    """Whether a process of session ``session`` listens on TCP ``port``; None without Linux ``/proc``."""
    proc = Path("/proc")
    if not (proc / "net/tcp").exists():
        return None
    inodes = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            rows = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cells = row.split()
            if len(cells) > 9 and cells[3] == "0A" and int(cells[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{cells[9]}]")
    if not inodes:
        return False
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            if int((pid_dir / "stat").read_text().rsplit(")", 1)[1].split()[3]) != session:
                continue
            if any(os.readlink(fd) in inodes for fd in (pid_dir / "fd").iterdir()):
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


def _answers_health(url: str) -> bool:
    """Whether a server we started answers ``GET url`` with 200 (2 s per read; no proxy: it is ours)."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as r:
            return bool(r.status == 200)
    except (OSError, ValueError):  # URLError, HTTPError, refused, timeouts
        return False
