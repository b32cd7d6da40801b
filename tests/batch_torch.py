"""batch_torch.py SCRIPT DIR [--timeout S]: runs many cases of a PyTorch
reference (tests/ft_torch.py, tests/hf_torch.py) in one python process, so
that torch and the reference are imported once, not once a case (about
1.5 s of CPU each, most of a small case's cost).

DIR/cases holds one case a line, a JSON list of SCRIPT's arguments, their
paths relative to DIR (written by tests/ft_lib.sh's ft_add). SCRIPT is
imported once; each case runs in a child forked from this process (its
state as a fresh run's after the imports: the modules' globals, marks and
seeds are the child's own, gone with it), in DIR, with sys.argv the case's,
through SCRIPT's main(); case N's stdout, stderr and exit status go to
DIR/N.out, DIR/N.err and DIR/N.rc (124: past S seconds, default 600, its
process group killed: DDP's ranks with it). A case's ranks (mp.spawn) are
fresh processes, as in a single run.

The batch's exit status: 0 when every case exited 0 or 2 (2: the
reference's refusal of bad usage, which the tests check), else 3. So
tests/torch_cache.py (SCRIPT a file keyed by its bytes, DIR a folder keyed
by its files' names and bytes: the cases and their inputs, not DIR's own
path) keeps a batch whose every case gave a verdict, and gives back every
file DIR gained on a hit; a crash or a timeout in any case is never kept.

ZS_CASE_TIMES=FILE (not needed by any test): a line appended to FILE a
case, its CPU seconds (the case's processes, its ranks included), wall
seconds, DIR's name, N and the case's arguments: where the time of make
check-torch goes, to keep CI's PyTorch step within its budget."""
import importlib.util
import json
import os
import resource
import signal
import sys
import time


def child(mod, script, args, d, n):
    """case N in this forked child: never returns"""
    rc = 1
    try:
        os.setpgid(0, 0)
        os.chdir(d)
        for fd, name in ((1, f"{n}.out"), (2, f"{n}.err")):
            f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.argv = [script] + args
        try:
            mod.main()
            rc = 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
    except BaseException:  # a traceback, as python prints one
        import traceback
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def wait(pid, limit):
    """the case's exit status; 124 (its group killed) past LIMIT seconds"""
    end = time.monotonic() + limit
    while True:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(st) if hasattr(os, "waitstatus_to_exitcode") else \
                (os.WEXITSTATUS(st) if os.WIFEXITED(st) else -os.WTERMSIG(st))
        if time.monotonic() > end:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
            return 124
        time.sleep(0.05)


def main():
    args = sys.argv[1:]
    limit = 600.0
    if len(args) == 4 and args[2] == "--timeout":
        limit = float(args[3])
        args = args[:2]
    if len(args) != 2 or not os.path.isfile(args[0]) or not os.path.isfile(os.path.join(args[1], "cases")):
        print("usage: batch_torch.py SCRIPT DIR [--timeout S] (DIR/cases: one JSON list of arguments a line)",
              file=sys.stderr)
        return 2
    script, d = os.path.abspath(args[0]), os.path.abspath(args[1])
    with open(os.path.join(d, "cases")) as f:
        cases = [json.loads(x) for x in f if x.strip()]
    sys.path.insert(0, os.path.dirname(script))
    name = os.path.splitext(os.path.basename(script))[0]
    spec = importlib.util.spec_from_file_location(name, script)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # the references import each other by name: one copy
    spec.loader.exec_module(mod)
    sys.stdout.flush()
    sys.stderr.flush()
    verdict = 0
    times = os.environ.get("ZS_CASE_TIMES")
    for n, case in enumerate(cases, 1):
        t0, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        pid = os.fork()
        if pid == 0:
            child(mod, script, case, d, n)
        rc = wait(pid, limit)
        if times:
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            with open(times, "a") as f:
                f.write(f"{cpu:.2f} {time.monotonic() - t0:.2f} {os.path.basename(d)} {n} {json.dumps(case)}\n")
        with open(os.path.join(d, f"{n}.rc"), "w") as f:
            f.write(f"{rc}\n")
        if rc not in (0, 2):
            verdict = 3
    return verdict


if __name__ == "__main__":
    sys.exit(main())
