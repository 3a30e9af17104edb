"""Start a command and SIGKILL it when ``kill_when(elapsed_s)`` says so (or let it finish): the soak tests' hammer."""

import os
import signal
import subprocess
import time


def run_and_kill(cmd, env, kill_when, limit_s: float = 120.0) -> None:
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    while time.time() - t0 < limit_s and p.poll() is None:
        if kill_when(time.time() - t0):
            break
        time.sleep(0.01)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()


def task_killed_on_second_case(kwargs, rank, world):
    """A ``generate`` array task that dies (``os._exit(137)``, as a SIGKILL or an OOM kill leaves it) while its second
    case is being written, in task 1 only: the others run as usual."""
    from worldgate.cluster import generate_task
    from worldgate.generate import runner

    if rank == 1:
        original, calls = runner.write_rollout, []

        def dying(*a, **kw):
            calls.append(1)
            if len(calls) == 2:
                os._exit(137)
            return original(*a, **kw)

        runner.write_rollout = dying
    return generate_task(kwargs, rank, world)
