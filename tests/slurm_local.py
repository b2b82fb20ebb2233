"""A real Slurm on localhost for the tests: munged, slurmctld and two slurmd daemons (nodes n1 and n2 on this
one host, each on its own port), all under one temporary folder, stopped again by PID.

    cluster = LocalSlurm(tmp_folder); cluster.start()
    job = cluster.submit(script, cwd=work)        # sbatch, then the end from the job-completion log
    cluster.stop()

Needs Debian's slurm-wlm and munge (Slurm 22.05) and root (slurmd runs jobs as their user). The configuration
follows what 22.05 accepts on a machine without systemd: proctrack/linuxproc, task/none, select/cons_tres, and
a cgroup.conf with CgroupPlugin=autodetect and IgnoreSystemd=yes. No accounting daemon: the job state comes
from jobcomp/filetxt, the job's output from its --output file.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hpml_lab.report.guards import alive

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "scontrol")
NODES = ("n1", "n2")
MEMORY_MB = 65536  # what each node says it has (config_overrides: slurmd believes it), so `--mem 32G` fits
CPUS_PER_NODE = 2


def unavailable() -> str:
    """Why a real Slurm cannot start here, or "" when it can."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
    if os.geteuid() != 0:
        return "the local Slurm needs root (slurmd starts jobs as their user)"
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Job:
    id: int
    returncode: int  # the job's exit code (the batch script's)
    state: str  # COMPLETED, FAILED, TIMEOUT, ... from the job-completion log
    exit_code: str  # "rc:signal"
    seconds: float
    output: str  # the job's --output file


class LocalSlurm:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.conf = self.root / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self.version = ""

    @property
    def env(self) -> dict[str, str]:
        """A user's shell (no HPML_ variables a test may have set) pointed at this cluster."""
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("HPML_")},
            "SLURM_CONF": str(self.conf),
        }

    def _write_config(self) -> None:
        r = self.root
        for sub in ("state", "log", *(f"spool-{n}" for n in NODES)):
            (r / sub).mkdir(parents=True, exist_ok=True)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        nodes = "\n".join(
            f"NodeName={n} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={free_port()} "
            f"CPUs={CPUS_PER_NODE} RealMemory={MEMORY_MB} State=UNKNOWN"
            for n in NODES
        )
        self.conf.write_text(f"""\
ClusterName=hpmltest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={r}/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool-%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={r}/jobcomp.txt
KillWait=10
MinJobAge=600
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        (r / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")

    def start(self, timeout_s: float = 60) -> None:
        self._write_config()
        r = self.root
        run = lambda *cmd: subprocess.run(
            cmd, env=self.env, check=True, capture_output=True, text=True, timeout=60
        )
        run(
            "munged",
            f"--socket={r}/munge.sock",
            f"--pid-file={r}/munged.pid",
            f"--key-file={r}/munge.key",
            f"--log-file={r}/log/munged.log",
            f"--seed-file={r}/munge.seed",
            "--force",
        )
        run("slurmctld", "-f", str(self.conf), "-i")
        for n in NODES:
            run("slurmd", "-f", str(self.conf), "-N", n)
        self.version = run("sinfo", "--version").stdout.strip()
        deadline = time.monotonic() + timeout_s
        states = ""
        while time.monotonic() < deadline:
            p = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True
            )
            states = p.stdout.strip()
            if (
                p.returncode == 0
                and len(states.splitlines()) == len(NODES)
                and all(line.split()[1] == "idle" for line in states.splitlines())
            ):
                return
            time.sleep(0.5)
        raise RuntimeError(f"the local Slurm did not come up in {timeout_s} s: {states!r}\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n" + p.read_text()[-3000:] for p in sorted((self.root / "log").glob("*.log"))
        )

    def stop(self) -> None:
        """Cancel what still runs, then SIGTERM to every daemon by its PID file, SIGKILL after 15 s."""
        if self.conf.exists():
            subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True, timeout=30)
        pids = []
        for name in [*(f"slurmd-{n}.pid" for n in NODES), "slurmctld.pid", "munged.pid"]:
            try:
                pids.append(int((self.root / name).read_text().split()[0]))
            except (OSError, ValueError, IndexError):
                continue
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in pids:
            _signal(pid, signal.SIGKILL)

    def submit(
        self,
        script: Path,
        cwd: Path,
        *sbatch_args: str,
        env: dict | None = None,
        timeout_s: float = 300,
        while_running: Callable[[int], None] | None = None,
    ) -> Job:
        """sbatch, then wait for the job's line in the job-completion log (polled every 0.2 s: `sbatch --wait`
        polls at 2, 4, 8, 16, 32 s intervals and would add up to half a minute per job);
        `while_running(job_id)` is called at every poll. A job that has not ended after timeout_s is cancelled
        and the test fails: no step may hang."""
        t0 = time.monotonic()
        p = subprocess.run(
            ["sbatch", "--parsable", *sbatch_args, str(script)],
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 0, f"sbatch did not submit: {p.stdout} {p.stderr}\n{self.logs()}"
        job_id = int(p.stdout.strip().split(";")[0])
        found = self._completion(job_id, timeout_s, while_running)
        if found is None:
            subprocess.run(["scancel", str(job_id)], env=self.env)
            raise AssertionError(
                f"job {job_id} did not end in {timeout_s} s (a hung step?)\n"
                + self._output(cwd, job_id)[-4000:]
            )
        state, code = found
        return Job(
            job_id, int(code.split(":")[0]), state, code, time.monotonic() - t0, self._output(cwd, job_id)
        )

    @staticmethod
    def _output(cwd: Path, job_id: int) -> str:
        return "\n".join(
            f.read_text(errors="replace") for f in sorted(Path(cwd).glob(f"slurm-*-{job_id}.out"))
        )

    def signal_batch(self, job_id: int, name: str) -> None:
        """Signal the job's batch shell, as Slurm does with `--signal=B:NAME@...` before a time limit."""
        subprocess.run(
            ["scancel", "--batch", f"--signal={name}", str(job_id)],
            env=self.env,
            capture_output=True,
            timeout=30,
        )

    def _completion(
        self, job_id: int, wait_s: float, while_running: Callable[[int], None] | None = None
    ) -> tuple[str, str] | None:
        log = self.root / "jobcomp.txt"
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if while_running is not None:
                while_running(job_id)
            text = log.read_text() if log.exists() else ""
            for line in text.splitlines():
                if line.startswith(f"JobId={job_id} "):
                    return re.search(r"JobState=(\S+)", line).group(1), re.search(
                        r" ExitCode=(\S+)", line
                    ).group(1)
            time.sleep(0.2)
        return None


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


APPTAINER_STAND_IN = """#!{python}
# A stand-in for `apptainer` (not packaged for Debian): records its arguments, checks what apptainer would
# (exec, its flags, the image and overlay files), then runs the command on the host. An ext3 overlay cannot be
# made or mounted here: `overlay create` makes a folder overlay instead (apptainer's own layout: upper/ and
# work/), and `exec` with a folder overlay runs the command with every argument under /ext3 (the overlay's
# files, as NYU Greene's overlays hold them) pointed at that folder's upper/ext3: what the overlay would show.
import json, os, sys

args = sys.argv[1:]
with open(os.environ["CT_LOG"], "a") as log:
    log.write(json.dumps({{"host": os.uname().nodename, "args": args}}) + "\\n")
if args[:2] == ["overlay", "create"]:
    assert args[2] == "--size" and args[3].isdigit(), args
    os.makedirs(os.path.join(args[4], "upper"))
    os.makedirs(os.path.join(args[4], "work"))
    sys.exit(0)
assert args[0] == "exec", args
i, mount = 1, None
while args[i].startswith("-"):
    flag = args[i]
    if flag in ("--overlay", "--bind", "-B"):
        value = args[i + 1]
        if not os.path.exists(value.split(":")[0]):
            sys.exit(f"apptainer stand-in: {{flag}} {{value}}: no such file")
        if flag == "--overlay" and os.path.isdir(value.split(":")[0]):
            mount = os.path.join(value.split(":")[0], "upper")
        i += 2
    elif flag in ("--nv", "--cleanenv", "-e"):
        i += 1
    else:
        sys.exit(f"apptainer stand-in: unknown flag {{flag}}")
image, command = args[i], args[i + 1 :]
if not os.path.isfile(image):
    sys.exit(f"apptainer stand-in: image {{image}} not found")
if mount:
    command = [mount + a if a == "/ext3" or a.startswith("/ext3/") else a for a in command]
os.execvp(command[0], command)
"""


def apptainer_stand_in(folder: Path, python: str) -> dict[str, str]:
    """A stand-in `apptainer` in folder/bin (see APPTAINER_STAND_IN), run by `python`; the environment that
    puts it first on PATH and logs each call's arguments, one JSON line each, to folder/apptainer.log
    (CT_LOG)."""
    bin_dir = Path(folder) / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "apptainer").write_text(APPTAINER_STAND_IN.format(python=python))
    (bin_dir / "apptainer").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CT_LOG": str(Path(folder) / "apptainer.log")}
