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
