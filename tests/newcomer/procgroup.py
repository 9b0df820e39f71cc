"""Process groups for the newcomer tests: a program started in a session of its
own (start_new_session=True) leads a group that holds everything it starts, so
a test can see and stop all of it (npx and make start children of their own)."""
import os
import signal
import time


def group_members(pgid):
    """The pids of the live (not zombie) processes in process group pgid."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        # after "(comm)": state, ppid, pgrp, ...
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


def program_of(pid):
    """The file name of the program pid runs, or None when it is gone."""
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid))
    except OSError:
        return None


def wait_group_gone(pgid, timeout):
    """True once no process of group pgid is left, False after timeout."""
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def kill_group(proc):
    """Last resort (a failed check, the test itself stopped): SIGKILL to the
    group proc leads, then reap proc."""
    if group_members(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait()
