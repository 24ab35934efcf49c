"""What the bench clients share: starting and stopping runwire-serve, and
reading a process's memory and CPU from Linux /proc."""

import os
import subprocess


def start_server(bin_dir, home, extra=()):
    """runwire-serve on a free loopback port with HARNESS_HOME=home: (process, port)."""
    env = dict(os.environ, HARNESS_HOME=home)
    p = subprocess.Popen([os.path.join(bin_dir, "runwire-serve"), "--listen", "127.0.0.1:0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    port = int(p.stdout.readline().decode().strip().rsplit(":", 1)[1])
    return p, port


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def status_kb(p, key):
    """A kB field of /proc/<pid>/status (VmHWM: the peak RSS); -1 when absent."""
    with open(f"/proc/{p.pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def cpu_ms(p):
    """utime + stime of every thread of the process: CPU time does not swing
    with other load on a shared machine the way wall time does."""
    with open(f"/proc/{p.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
