"""torch_cache.py SCRIPT ARGS...: runs a PyTorch reference (tests/*_torch.py)
as PYTHON SCRIPT ARGS... would, keeping what it wrote in the folder
$ZS_TORCH_CACHE, so that a second make check-torch (another build's: a
sanitizer build, zerosim's side under ASan) compares against the same real
PyTorch figures without training the models again. tests/torch_cache.sh
(the python tests/torch_python.sh hands the tests when ZS_TORCH_CACHE is
set) runs it for the reference scripts only.

A reference is deterministic given what it reads, so the key is a SHA-256
of: this python's version, the torch it imports (torch/version.py's bytes),
every tests/*.py beside SCRIPT (the references import each other), the
environment that steers the arithmetic or the rendezvous (OPENBLAS_*,
OMP_*, MKL_*, GLOO_*, USE_LIBUV, PYTHONHASHSEED, TORCH_*), and each
argument: --out's value by its name alone (an output, there or not: a
test's loop writes every case's reference to one path, whose bytes before
the run are the last case's, not an input), a file by its bytes, a folder
by its files' names and bytes (a zerosim binary among them is hashed
like any other file, and a sanitizer build's misses: so a reference runs
none — tests/moe_torch.py writes PyTorch's results, tests/moe_torch.sh
runs moe_dump and tests/moe_cmp.py compares; moe_model_torch.sh runs
moe_model_dump and hands the reference its folder), a path not there yet by its name (an output), anything
else as written. What it keeps: the exit status (0 and 1 only: a verdict;
any other status, a crash or a timeout is never kept), stdout, stderr,
--out's file, every file argument the run made or changed, and the files
a folder argument gained or changed; a hit writes them all back. A miss runs PyTorch; nothing is ever
committed or shipped with the cache.

The one exception: hf_torch.py --zerosim BINARY runs zerosim's theory
itself and writes it into its JSON. The binary is left out of the key and,
on a hit, hf_torch.py runs again with --torch-json (the kept JSON): no
PyTorch, zerosim's theory afresh by this build's binary.

--trace FILE (hf_torch.py's event list) is an output like --out's value
(keyed by its name); the files beside it named FILE or FILE.SOMETHING
(FILE.clean, FILE.step1, under --ddp FILE.rankK, FILE.rankK.clean) that
the run made or rewrote are kept with it and written back on a hit, a
replay's too (--torch-json writes no trace).

Every run appends a line to $ZS_TORCH_CACHE/log: hit|miss|run SCRIPT KEY
(run: not kept — its status was not a verdict)."""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ENV = ("OPENBLAS_", "OMP_", "MKL_", "GLOO_", "USE_LIBUV", "PYTHONHASHSEED", "TORCH_", "ATEN_", "LD_PRELOAD",
       "LD_LIBRARY_PATH")


def is_out(args, i):
    """whether args[i] is --out's or --trace's value: an output, whatever is
    there before"""
    return i > 0 and args[i - 1] in ("--out", "--trace")


def traced(args):
    """{index of --trace's value: {name: (mtime_ns, size, sha256)}} of the
    files beside it whose names are its value's, or begin with it and a dot
    (hf_torch.py's FILE, FILE.clean, FILE.step1, under --ddp FILE.rankK and
    FILE.rankK.clean, .step1), as they are now"""
    out = {}
    for i, x in enumerate(args):
        if i and args[i - 1] == "--trace":
            d, b = os.path.dirname(x) or ".", os.path.basename(x)
            files = {}
            for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
                p = os.path.join(d, n)
                if (n == b or n.startswith(b + ".")) and not n.endswith(".tmp") and os.path.isfile(p) \
                        and not os.path.islink(p):
                    st = os.stat(p)
                    files[n[len(b):]] = (st.st_mtime_ns, st.st_size, file_hash(p))
            out[i] = files
    return out


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def tree(path):
    """{relative name: sha256} of every regular file under the folder PATH"""
    out = {}
    for d, dirs, files in os.walk(path):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, path)] = file_hash(p)
    return out


def key(script, args):
    """the key (hex), and whether the zerosim binary was left out of it"""
    h = hashlib.sha256(b"zerosim torch_cache 1\0")
    h.update(sys.version.encode() + b"\0")
    spec = importlib.util.find_spec("torch")
    version = os.path.join(os.path.dirname(spec.origin), "version.py") if spec and spec.origin else ""
    h.update(b"torch\0" + (file_hash(version).encode() if os.path.isfile(version) else b"none") + b"\0")
    here = os.path.dirname(os.path.abspath(script))
    for n in sorted(os.listdir(here)):
        if n.endswith(".py"):
            h.update(f"py {n} {file_hash(os.path.join(here, n))}\0".encode())
    h.update(f"script {os.path.basename(script)}\0".encode())
    for k in sorted(os.environ):
        if k.startswith(ENV):
            h.update(f"env {k}={os.environ[k]}\0".encode())
    replay = False
    for i, x in enumerate(args):
        if i and args[i - 1] == "--zerosim" and os.path.basename(script) == "hf_torch.py":
            h.update(b"arg zerosim\0")
            replay = True
        elif is_out(args, i):
            h.update(f"arg out {os.path.basename(x)}\0".encode())
        elif os.path.isfile(x):
            h.update(f"arg file {file_hash(x)}\0".encode())
        elif os.path.isdir(x):
            h.update(f"arg dir {json.dumps(tree(x), sort_keys=True)}\0".encode())
        elif "/" in x:
            h.update(f"arg new {os.path.basename(x)}\0".encode())
        else:
            h.update(f"arg {x}\0".encode())
    return h.hexdigest(), replay


def log(cache, what, script, k):
    with open(os.path.join(cache, "log"), "a") as f:
        f.write(f"{what} {os.path.basename(script)} {k}\n")


def put(path, data):
    """DATA (bytes) to PATH, written beside it and renamed: never half a file"""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def hit(entry, args, replay, py, script):
    meta = json.load(open(os.path.join(entry, "meta.json")))
    for o in meta["outputs"]:
        if replay and "suffix" not in o:
            continue  # a replay writes its own (its --trace's files are PyTorch's: given back)
        x = args[o["arg"]]
        dest = x + o["suffix"] if "suffix" in o else os.path.join(x, o["name"]) if o["name"] else x
        put(dest, open(os.path.join(entry, o["file"]), "rb").read())
    if replay:
        # PyTorch's side kept; zerosim's theory by this build's binary
        return subprocess.run([py, script] + args + ["--torch-json", os.path.join(entry, "torch.json")]).returncode
    sys.stdout.buffer.write(open(os.path.join(entry, "stdout"), "rb").read())
    sys.stdout.flush()
    sys.stderr.buffer.write(open(os.path.join(entry, "stderr"), "rb").read())
    return meta["rc"]


def miss(cache, k, args, py, script, replay):
    before = {i: tree(x) for i, x in enumerate(args) if os.path.isdir(x)}
    files = {i: file_hash(x) for i, x in enumerate(args) if os.path.isfile(x)}
    new = [i for i, x in enumerate(args) if ("/" in x or is_out(args, i)) and not os.path.exists(x)]
    was_traced = traced(args)
    p = subprocess.run([py, script] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sys.stdout.buffer.write(p.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(p.stderr)
    sys.stderr.flush()
    # made (a new path), --out's (made or rewritten), or any file argument
    # whose bytes the run changed
    outputs = [(i, "", x) for i, x in enumerate(args) if os.path.isfile(x) and
               (i in new or is_out(args, i) or (i in files and file_hash(x) != files[i]))]
    # --trace FILE's files (FILE itself among them), each one the run made
    # or rewrote (a new mtime, even with the bytes of the last case's)
    sides = [(i, suffix) for i, now in traced(args).items() for suffix, st in now.items()
             if was_traced[i].get(suffix) != st]
    outputs = [o for o in outputs if o[0] not in was_traced]
    for i, was in before.items():
        outputs += [(i, n, os.path.join(args[i], n)) for n, s in tree(args[i]).items() if was.get(n) != s]
    torch_json = None
    if replay:
        # the JSON hf_torch.py wrote (--out's, or stdout)
        at = args.index("--out") + 1 if "--out" in args[:-1] else None
        torch_json = open(args[at], "rb").read() if at is not None and os.path.isfile(args[at]) else p.stdout
    if p.returncode not in (0, 1) or (replay and p.returncode):
        log(cache, "run", script, k)
        return p.returncode
    d = tempfile.mkdtemp(prefix=k + ".", dir=cache)
    meta = dict(rc=p.returncode, outputs=[])
    for n, (i, name, path) in enumerate(outputs):
        put(os.path.join(d, f"out{n}"), open(path, "rb").read())
        meta["outputs"].append(dict(arg=i, name=name, file=f"out{n}"))
    for n, (i, suffix) in enumerate(sides):
        put(os.path.join(d, f"trace{n}"), open(args[i] + suffix, "rb").read())
        meta["outputs"].append(dict(arg=i, suffix=suffix, file=f"trace{n}"))
    put(os.path.join(d, "stdout"), p.stdout)
    put(os.path.join(d, "stderr"), p.stderr)
    if torch_json is not None:
        put(os.path.join(d, "torch.json"), torch_json)
    put(os.path.join(d, "meta.json"), json.dumps(meta).encode())
    try:
        os.rename(d, os.path.join(cache, k))  # the first of two equal runs side by side is kept
    except OSError:
        pass
    log(cache, "miss", script, k)
    return p.returncode


def main():
    py, script, args = sys.executable, sys.argv[1], sys.argv[2:]
    cache = os.environ.get("ZS_TORCH_CACHE", "")
    if not cache or not os.path.isdir(cache):
        os.execv(py, [py, script] + args)
    k, replay = key(script, args)
    entry = os.path.join(cache, k)
    if os.path.isfile(os.path.join(entry, "meta.json")):
        log(cache, "hit", script, k)
        return hit(entry, args, replay, py, script)
    return miss(cache, k, args, py, script, replay)


if __name__ == "__main__":
    sys.exit(main())
