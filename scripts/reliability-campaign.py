#!/usr/bin/env python3
"""Reliability campaign: run the `tessera` binary on hundreds of generated malformed inputs
(every mesh reader, gzip layer and special files, problem files, queries and query field
files), each under a time limit (`timeout`) and an address-space limit (`prlimit --as`),
and classify every run:

  ok          exit status 1 with one `error:` line of bounded length (the expected outcome:
              every input here is malformed, too large, or otherwise must be refused)
  accepted    exit status 0: a malformed input was silently accepted
  panic       exit status 101 (a Rust panic)
  abort       killed by a signal (SIGABRT on allocation failure, SIGSEGV, ...) or out of time
  message     refused, but the message is not one bounded `error:` line

It prints a table by family and the peak resident memory per input (from wait4), and exits
non-zero unless every run is `ok`. Inputs are generated deterministically from the fuzz
corpora and the hostile fixtures of the repository.

usage: scripts/reliability-campaign.py --bin target/debug/tessera [--json report.json]
       [--jobs 2] [--timeout 20] [--mem-mb 3072] [--keep DIR]
"""
import argparse, gzip, json, os, random, re, resource, shutil, signal, struct, subprocess
import sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CORPUS = os.path.join(ROOT, "fuzz/corpus")
FIX = os.path.join(ROOT, "crates/tessera-mesh/tests/fixtures")
MAX_LINE = 1100  # the CLI clips error lines at 1000 characters, plus `error: `


def read(p):
    with open(p, "rb") as f:
        return f.read()


class Gen:
    """Collects (family, name, argv builder) cases with their input files."""

    def __init__(self, work):
        self.work = work
        self.cases = []
        self.n = 0

    def file(self, name, data):
        self.n += 1
        d = os.path.join(self.work, "c%04d" % self.n)
        os.makedirs(d)
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return p

    def add(self, family, label, argv):
        self.cases.append({"family": family, "label": label, "argv": argv})


# ---------------------------------------------------------------- mutations that break a file


def numbers(b):
    return [(m.start(), m.end()) for m in re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", b)]


def huge_count(rng, b, first_line_of, counts_after):
    """Replace a count that follows a keyword line (e.g. b'$Nodes') with 4e9."""
    out = []
    for kw in counts_after:
        i = b.find(kw)
        if i < 0:
            continue
        j = b.find(b"\n", i) + 1
        m = re.compile(rb"\d+").search(b, j)
        if m:
            for big in (b"4000000000", b"1000000000"):
                out.append((kw.decode(errors="replace").strip("$ \n") + "-" + big.decode()[:2],
                            b[: m.start()] + big + b[m.end():]))
    return out


def cut_inside(b, keep_end_marker, rng, k):
    """k truncations strictly before the end marker (or inside the last record)."""
    end = b.rfind(keep_end_marker) if keep_end_marker else len(b) - 1
    if end <= 10:
        end = len(b) - 1
    pts = sorted(set(rng.randrange(5, end) for _ in range(k)))
    return [b[:p] for p in pts]


VTU_SEEDS = ["polyhedron.vtu", "quadratic-tet.vtu", "two-tets-ascii.vtu", "two-tets-base64.vtu",
             "two-tets-raw.vtu", "two-tets-zlib.vtu"]


def mesh_cases(g, rng):
    """Malformed mesh files of every format, each invalid by construction."""
    seeds = {
        "msh": [read(os.path.join(FIX, "mixed-v41.msh")), read(os.path.join(FIX, "mixed-v22.msh")),
                read(os.path.join(CORPUS, "msh/seed-bin41.msh")), read(os.path.join(CORPUS, "msh/seed-bin22.msh"))],
                # (the comment line is dropped: a number in a comment may be changed freely)
        "mesh": [b"\n".join(l for l in read(os.path.join(FIX, "mixed.mesh")).split(b"\n") if not l.startswith(b"#"))],
        "ovm": [read(os.path.join(FIX, "cube.ovm"))],
        # the valid .vtu seeds by name (the corpus also holds inputs cargo fuzz found, which are
        # errors already, and grows; naming the seeds keeps the generated cases fixed)
        "vtu": [read(os.path.join(CORPUS, "vtu", f)) for f in VTU_SEEDS],
    }
    end_marker = {"msh": b"$EndElements", "mesh": b"End", "ovm": None, "vtu": b"</VTKFile>"}
    count_kw = {"msh": [b"$Nodes", b"$Elements", b"$PhysicalNames", b"$Entities"],
                "mesh": [b"Vertices", b"Hexahedra", b"Tetrahedra", b"Triangles"],
                "ovm": [b"Vertices", b"Edges", b"Faces", b"Polyhedra"], "vtu": []}
    for ext, ss in seeds.items():
        for si, s in enumerate(ss):
            binary = b"\x00" in s[:200] or s.startswith(b"$MeshFormat\n4.1 1") or s.startswith(b"$MeshFormat\n2.2 1")
            # truncations
            for t in cut_inside(s, end_marker[ext], rng, 8 if ext != "vtu" else 5):
                g.add("truncated ." + ext, "seed %d, %d bytes" % (si, len(t)),
                      ["mesh", "info", g.file("m." + ext, t)])
            # huge counts in headers
            if not binary:
                for lab, t in huge_count(rng, s, None, count_kw[ext]):
                    g.add("huge count ." + ext, lab, ["mesh", "info", g.file("m." + ext, t)])
                        # a number replaced by a value no numeric field of these formats accepts (NaN,
            # infinity, overflow to infinity, not a number); for .vtu only inside data arrays
            if not binary:
                lo, hi = (s.find(b"<Points>"), s.find(b"</Cells>")) if ext == "vtu" else (0, len(s))
                nums = [x for x in numbers(s) if lo <= x[0] and x[1] <= hi]
                if ext == "vtu":
                    # only numbers of ASCII data arrays: a digit inside base64 text replaced by
                    # "inf" is still base64 (i, n, f are base64 letters) and may decode to a valid file
                    spans = [m.span(1) for m in re.finditer(rb'format="ascii"[^>]*>([^<]*)</DataArray>', s)]
                    nums = [x for x in nums if any(a <= x[0] and x[1] <= b for a, b in spans)]
                for k in range(10 if ext != "vtu" else 6):
                    if not nums:
                        break
                    a, e = nums[rng.randrange(len(nums))]
                    bad = rng.choice([b"nan", b"inf", b"-inf", b"1e400", b"1x"])
                    t = s[:a] + bad + s[e:]
                    g.add("bad number ." + ext, "seed %d: %s -> %s" % (si, s[a:e].decode(), bad.decode()),
                          ["mesh", "info", g.file("m." + ext, t)])
            # a repeated section / duplicated cell line
            if ext == "msh" and not binary:
                i = s.find(b"$Elements")
                g.add("repeated section .msh", "seed %d" % si, ["mesh", "info", g.file("m.msh", s + s[i:])])
            if ext == "ovm":
                for rep in [(b"4 0 2 4 6\n", b"4 0 2 4 7\n"), (b"4 0 2 4 6\n", b"4 0 2 4 8\n"),
                            (b"Polyhedra\n6\n", b"Polyhedra\n0\n")]:
                    t = s.replace(*rep) if rep[0] != b"Polyhedra\n6\n" else s[: s.find(b"Polyhedra")] + rep[1]
                    g.add("invalid topology .ovm", rep[1].decode().strip(), ["mesh", "info", g.file("m.ovm", t)])
            if ext == "vtu":
                for a, b2 in [(b'NumberOfPoints="5"', b'NumberOfPoints="4000000000"'),
                              (b'NumberOfCells="2"', b'NumberOfCells="4000000000"'),
                              (b'offset="0"', b'offset="999999"'), (b"10 10", b"10 99"),
                              (b'header_type="UInt64"', b'header_type="UInt8"')]:
                    if a in s:
                        g.add("bad header .vtu", "seed %d: %s" % (si, b2.decode()),
                              ["mesh", "info", g.file("m.vtu", s.replace(a, b2, 1))])
    # TetGen pairs: both files in one folder
    node, ele = read(os.path.join(FIX, "cube.node")), read(os.path.join(FIX, "cube.ele"))
    for k, (n2, e2) in enumerate([
        (node, ele[:-3]), (node[:-2], ele), (node.replace(b"8 3 1 1", b"4000000000 3 1 1"), ele),
        (node, ele.replace(b"6 4 1", b"4000000000 4 1")), (node, ele.replace(b"1  1 2 4 8", b"1  1 2 4 9")),
        (node, ele.replace(b"2  1 6 2 8", b"2  1 6 2 -8")), (node, ele + b"7  1 2 4 8  7\n"),
        (node, ele.replace(b"6 4 1", b"7 4 1") + b"7  8 4 2 1  7\n"), (node.replace(b"0.5", b"nan", 1), ele),
        (node, b""), (b"", ele),
    ]):
        d = os.path.join(g.work, "tg%02d" % k)
        os.makedirs(d)
        open(os.path.join(d, "m.node"), "wb").write(n2)
        open(os.path.join(d, "m.ele"), "wb").write(e2)
        g.add("malformed TetGen pair", "case %d" % k, ["mesh", "info", os.path.join(d, "m.node")])
    # the hostile reproducers, as files (each must be refused)
    hostile = os.path.join(FIX, "hostile")
    for f in sorted(os.listdir(hostile)):
        if f.endswith(".ele"):
            continue
        g.add("hostile fixture", f, ["mesh", "info", os.path.join(hostile, f)])
    for f in sorted(os.listdir(os.path.join(FIX, "malformed"))):
        if f.endswith(".ele"):
            continue
        g.add("malformed fixture", f, ["mesh", "info", os.path.join(FIX, "malformed", f)])


def gzip_cases(g, rng):
    mesh = read(os.path.join(FIX, "mixed-v41.msh"))
    z = gzip.compress(mesh, mtime=0)
    member = gzip.compress(bytes(64 << 20), mtime=0)
    g.add("gzip", "bomb 16 MB -> 16 GiB", ["mesh", "info", g.file("bomb.msh.gz", member * 256)])
    g.add("gzip", "bomb 1 MB -> 1 GiB", ["mesh", "info", g.file("bomb.mesh.gz", member * 16)])
    for k in range(6):
        p = rng.randrange(12, len(z) - 1)
        g.add("gzip", "truncated at %d" % p, ["mesh", "info", g.file("t.msh.gz", z[:p])])
    for k in range(6):
        t = bytearray(z)
        i = rng.randrange(10, len(z) - 8)
        t[i] ^= 0x5A
        g.add("gzip", "corrupt byte %d" % i, ["mesh", "info", g.file("c.msh.gz", bytes(t))])
    g.add("gzip", "name .gz, no magic", ["mesh", "info", g.file("plain.msh.gz", mesh)])
    g.add("gzip", "trailing garbage", ["mesh", "info", g.file("g.msh.gz", z + b"garbage!")])
    g.add("gzip", "gzip of a truncated mesh", ["mesh", "info", g.file("tm.msh.gz", gzip.compress(mesh[:300], mtime=0))])


def special_cases(g):
    d = os.path.join(g.work, "special")
    os.makedirs(d)
    os.symlink("/dev/zero", os.path.join(d, "zero.msh"))
    os.symlink("/dev/urandom", os.path.join(d, "random.ovm"))
    os.mkfifo(os.path.join(d, "fifo.mesh"))
    os.makedirs(os.path.join(d, "dir.msh"))
    os.symlink(os.path.join(d, "nowhere"), os.path.join(d, "dangling.msh"))
    for f in ["zero.msh", "random.ovm", "fifo.mesh", "dir.msh", "dangling.msh"]:
        g.add("special file", f, ["mesh", "info", os.path.join(d, f)])
    os.mkfifo(os.path.join(d, "fifo.toml"))
    g.add("special file", "fifo.toml", ["fem", "solve", "--device", "cpu", "-o", os.path.join(d, "out"), os.path.join(d, "fifo.toml")])
    g.add("special file", "/dev/zero as a field", ["query", "eval", "p + 1", "--field", "p=/dev/zero", "--precision", "f32", "--out", os.path.join(d, "o.bin")])


BASE = """title = "t"
order = 1
[mesh]
generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }
[material]
youngs = 1000.0
poisson = 0.3
[[fixed]]
selector = { type = "plane", point = [0, 0, 0], normal = [1, 0, 0] }
[[loads]]
type = "traction"
selector = { type = "plane", point = [2, 0, 0], normal = [1, 0, 0] }
traction = [0.0, 0.0, -1.0]
"""


def problem_cases(g, rng):
    out_dir = os.path.join(g.work, "fem-out")
    edits = [
        ("order = 1", "order = 7"), ("order = 1", "order = -1"), ("order = 1", 'order = "two"'),
        ("order = 1\n", ""), ("youngs = 1000.0", "youngs = -5"), ("youngs = 1000.0", "youngs = nan"),
        ("youngs = 1000.0", "youngs = inf"), ("poisson = 0.3", "poisson = 0.5"),
        ("poisson = 0.3", "poisson = 0.3\nshear = 1"), ("cells = [2, 1, 1]", "cells = [400, 400, 400]"),
        ("cells = [2, 1, 1]", "cells = [0, 1, 1]"), ("cells = [2, 1, 1]", "cells = [2.5, 1, 1]"),
        ("cells = [2, 1, 1]", "cells = [2, 1]"), ("generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }", "generate = { bracket = 1000 }"),
        ("generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }", "generate = { bracket = 5 }"),
        ("generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }", 'file = "missing.msh"'),
        ("generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }", 'file = "/dev/zero"'),
        ("size = [2.0, 1.0, 1.0]", "size = [2.0, -1.0, 1.0]"), ('type = "plane"', 'type = "plain"'),
        ("normal = [1, 0, 0] }\n[[loads]]", "normal = [0, 0, 0] }\n[[loads]]"),
        ("point = [2, 0, 0]", "point = [9, 0, 0]"), ("traction = [0.0, 0.0, -1.0]", "traction = [0.0, 0.0]"),
        ("traction = [0.0, 0.0, -1.0]", "traction = [nan, 0.0, 0.0]"), ("[[fixed]]", "[[fixd]]"),
        ("[[fixed]]\nselector = { type = \"plane\", point = [0, 0, 0], normal = [1, 0, 0] }\n", ""),
        ("[material]", "[material"), ("title = \"t\"", "title = \"" + "x" * 100000), ('type = "traction"', 'type = "gravity"'),
        ("[[loads]]", "[[loads]]\n[[loads]]"), ("order = 1", "order = 1\norder = 2"),
        ("[mesh]", "[mesh]\ngenerate = { box = { cells = [1, 1, 1], size = [1.0, 1.0, 1.0] } }"),
        ("traction = [0.0, 0.0, -1.0]", "traction = [0.0, 0.0, -1.0]\n[solver]\nmethod = \"lu\""),
        ("traction = [0.0, 0.0, -1.0]", "traction = [0.0, 0.0, -1.0]\n[solver]\ntolerance = -1"),
        ("traction = [0.0, 0.0, -1.0]", "traction = [0.0, 0.0, -1.0]\n[solver]\nmax_iterations = 0"),
        # a floating second body cannot be generated: the fixed plane removed instead
        ("normal = [1, 0, 0] }\n[[loads]]", "normal = [1, 0, 0], tolerance = -1 }\n[[loads]]"),
    ]
    for a, b in edits:
        if a not in BASE:
            raise SystemExit("campaign: edit target missing: %r" % a)
        g.add("problem file", b.replace("\n", " ")[:60], ["fem", "solve", "--device", "cpu", "-o", out_dir,
                                                          g.file("p.toml", BASE.replace(a, b, 1))])
    # byte-level damage
    for k in range(12):
        t = bytearray(BASE.encode())
        for _ in range(3):
            i = rng.randrange(len(t))
            t[i] = rng.choice(b"[]{}=\",\n#\x00\xff")
        if bytes(t) == BASE.encode():
            continue
        g.add("problem file (bytes)", "damage %d" % k, ["fem", "solve", "--device", "cpu", "-o", out_dir, g.file("p.toml", bytes(t))])
    g.add("problem file", "binary garbage", ["fem", "solve", "--device", "cpu", "-o", out_dir, g.file("p.toml", bytes(range(256)) * 4)])
    g.add("problem file", "missing file", ["fem", "solve", "--device", "cpu", "-o", out_dir, os.path.join(g.work, "none.toml")])
    # a mesh file that reads but is not a solid: a degenerate tetrahedron and a floating body
    two = ("$MeshFormat\n2.2 0 8\n$EndMeshFormat\n$Nodes\n8\n1 0 0 0\n2 1 0 0\n3 0 1 0\n4 0 0 1\n"
           "5 5 0 0\n6 6 0 0\n7 5 1 0\n8 5 0 1\n$EndNodes\n$Elements\n2\n1 4 0 1 2 3 4\n2 4 0 5 6 7 8\n$EndElements\n")
    d = os.path.join(g.work, "floating")
    os.makedirs(d)
    open(os.path.join(d, "two.msh"), "w").write(two)
    for method in ["pcg", "cholesky"]:
        p = os.path.join(d, method + ".toml")
        open(p, "w").write(BASE.replace("generate = { box = { cells = [2, 1, 1], size = [2.0, 1.0, 1.0] } }", 'file = "two.msh"')
                           .replace("point = [2, 0, 0], normal = [1, 0, 0]", "point = [0, 0, 0], normal = [0, 0, 1]")
                           + '[solver]\nmethod = "%s"\n' % method)
        g.add("problem file", "floating body, " + method, ["fem", "solve", "--device", "cpu", "-o", out_dir, p])


def query_cases(g, rng):
    d = os.path.join(g.work, "query")
    os.makedirs(d)
    f32 = os.path.join(d, "p.bin")
    open(f32, "wb").write(struct.pack("<4f", 1, 2, 3, 4))
    out = os.path.join(d, "o.bin")
    exprs = ["p +", "(p", "p)", "foo(p)", "sqrt(p, p)", "q + 1", "1e999", "p ^^ 2", "", "   ",
             "select(p > 0, 1)", "p" + " + p" * 25000, "(" * 5000 + "p" + ")" * 5000, "p @ 2",
             "max(", "\u00e9 + p", "p + 99999999999999999999999999999999999e99999", "atan2(p)",
             "-" * 10000 + "p", "p " * 3000]
    for e in exprs:
        g.add("query expression", repr(e[:30]), ["query", "eval", e, "--field", "p=" + f32, "--precision", "f32", "--out", out])
    odd = os.path.join(d, "odd.bin")
    open(odd, "wb").write(b"\x00" * 7)
    g.add("query field file", "7 bytes as f32", ["query", "eval", "p + 1", "--field", "p=" + odd, "--precision", "f32", "--out", out])
    g.add("query field file", "raw without precision", ["query", "eval", "p + 1", "--field", "p=" + f32, "--out", out])
    g.add("query field file", "missing", ["query", "eval", "p + 1", "--field", "p=" + os.path.join(d, "none.bin"), "--precision", "f32", "--out", out])
    g.add("query field file", "no NAME=", ["query", "eval", "p + 1", "--field", f32, "--precision", "f32", "--out", out])
    short = os.path.join(d, "short.bin")
    open(short, "wb").write(struct.pack("<2f", 1, 2))
    g.add("query field file", "unequal lengths", ["query", "eval", "p + q", "--field", "p=" + f32, "--field", "q=" + short, "--precision", "f32", "--out", out])
    seeds = [read(os.path.join(CORPUS, "query_fields", f)) for f in sorted(os.listdir(os.path.join(CORPUS, "query_fields"))) if f.endswith(".npy")]
    for k in range(24):
        s = bytearray(rng.choice(seeds))
        kind = k % 4
        if kind == 0:
            s = s[: rng.randrange(1, len(s))]
        elif kind == 1:
            # inside the header (a changed data byte is still a valid file)
            hl = 10 + int.from_bytes(s[8:10], "little") if s[6:7] == b"\x01" else len(s)
            i = rng.randrange(10, max(11, min(hl, len(s))))
            s[i] = rng.choice(b"(),'x9\xff")
        elif kind == 2:
            s = s.replace(b"(", b"(4000000000, ", 1)
        else:
            s = s.replace(b"'descr': '", b"'descr': '?", 1)
        p = g.file("f.npy", bytes(s))
        g.add("query field file (.npy)", "mutation %d" % k, ["query", "eval", "p + 1", "--field", "p=" + p, "--out", out])


# ---------------------------------------------------------------- running


def run_one(bin_path, case, timeout, mem_mb, env):
    argv = ["prlimit", "--as=%d" % (mem_mb << 20), "--", "timeout", "-s", "KILL", str(timeout), bin_path] + case["argv"]
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    case["seconds"] = round(time.monotonic() - t, 3)
    case["peak_mb"] = round(ru.ru_maxrss / 1024, 1)
    case["status"] = p.returncode
    text = err.decode(errors="replace")
    lines = [l for l in text.splitlines() if l.strip()]
    case["stderr"] = text[:300]
    rc = p.returncode
    if rc == 0:
        case["outcome"] = "accepted"
    elif rc == 101 or "panicked" in text:
        case["outcome"] = "panic"
    elif rc < 0 or rc in (124, 137) or rc >= 128:
        case["outcome"] = "abort"
    elif len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) <= MAX_LINE:
        case["outcome"] = "ok"
    else:
        case["outcome"] = "message"
    return case


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--json")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=20)
    ap.add_argument("--mem-mb", type=int, default=3072)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--keep")
    a = ap.parse_args()
    for tool in ("prlimit", "timeout"):
        if shutil.which(tool) is None:
            raise SystemExit("campaign: `%s` is needed (util-linux / coreutils)" % tool)
    bin_path = os.path.abspath(a.bin)
    work = a.keep or tempfile.mkdtemp(prefix="tessera-campaign-")
    os.makedirs(work, exist_ok=True)
    rng = random.Random(a.seed)
    g = Gen(work)
    mesh_cases(g, rng)
    gzip_cases(g, rng)
    special_cases(g)
    problem_cases(g, rng)
    query_cases(g, rng)
    env = dict(os.environ, TESSERA_MAX_MEMORY="", NO_COLOR="1")
    env.pop("TESSERA_MAX_MEMORY")
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        results = list(ex.map(lambda c: run_one(bin_path, c, a.timeout, a.mem_mb, env), g.cases))
    wall = time.monotonic() - t0
    fams = {}
    for r in results:
        f = fams.setdefault(r["family"], {"inputs": 0, "ok": 0, "accepted": 0, "panic": 0, "abort": 0, "message": 0, "peak_mb": 0.0, "max_s": 0.0})
        f["inputs"] += 1
        f[r["outcome"]] += 1
        f["peak_mb"] = max(f["peak_mb"], r["peak_mb"])
        f["max_s"] = max(f["max_s"], r["seconds"])
    print("%-28s %6s %5s %8s %5s %5s %7s %9s %7s" % ("family", "inputs", "ok", "accepted", "panic", "abort", "message", "peak MB", "max s"))
    for name, f in fams.items():
        print("%-28s %6d %5d %8d %5d %5d %7d %9.1f %7.2f" % (name, f["inputs"], f["ok"], f["accepted"], f["panic"], f["abort"], f["message"], f["peak_mb"], f["max_s"]))
    tot = {k: sum(f[k] for f in fams.values()) for k in ["inputs", "ok", "accepted", "panic", "abort", "message"]}
    peaks = sorted(r["peak_mb"] for r in results)
    print("%-28s %6d %5d %8d %5d %5d %7d" % ("total", tot["inputs"], tot["ok"], tot["accepted"], tot["panic"], tot["abort"], tot["message"]))
    print("peak memory per input: median %.1f MB, max %.1f MB (%s); limits: %d s, %d MB address space; wall %.1f s"
          % (peaks[len(peaks) // 2], peaks[-1], max(results, key=lambda r: r["peak_mb"])["label"], a.timeout, a.mem_mb, wall))
    bad = [r for r in results if r["outcome"] != "ok"]
    for r in bad[:40]:
        print("  %s [%s] %s: status %s: %s" % (r["outcome"].upper(), r["family"], r["label"], r["status"], r["stderr"].strip()[:200]))
    print("result: %d panics, %d aborts, %d silent acceptances, %d bad messages in %d inputs"
          % (tot["panic"], tot["abort"], tot["accepted"], tot["message"], tot["inputs"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"wall_seconds": wall, "families": fams, "totals": tot, "inputs": results}, f, indent=1)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
