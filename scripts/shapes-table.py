#!/usr/bin/env python3
"""scripts/shapes-table.py DIR: the markdown tables of issue 20 from what
scripts/real-shapes.sh wrote into DIR (<op>-<dtype>.json, the output of
`bench --torch --json`): per op, one row a shape and dtype with the
kernel's median, PyTorch's (eager; torch.compile where timed), the
same-size copy, the kernel against PyTorch (above 1: the kernel is
faster) and against the copy (memory-bound ops: the goal is within 1.10x
where the copy takes 10 us or more).  A figure bench could not take is
"-", with its reason from the .err file below the table."""
import glob
import json
import os
import sys

OPS = ["reduce", "softmax", "layernorm", "rmsnorm", "rotary_embedding",
       "cross_entropy", "flash_attention", "matmul", "fused_mlp"]


def med(x):
    return x.get("median_us") if isinstance(x, dict) else None


def fmt(v, f="%.2f"):
    return f % v if isinstance(v, (int, float)) and v > 0 else "-"


def rows(path):
    with open(path) as f:
        b = json.load(f)
    for s in b.get("shapes", [b]):
        k = med((s.get("kernels") or [{}])[0])
        t = s.get("torch") or {}
        e, c = med(t.get("eager")), med(t.get("compile"))
        cp = med(s.get("copy"))
        yield (s.get("shape"), s.get("dtype"), k, e, c, cp,
               e / k if k and e else None,
               k / cp if k and cp and s.get("floor_kind") == "copy"
               else None)


def main():
    d = sys.argv[1]
    for op in OPS:
        files = sorted(glob.glob(os.path.join(d, "%s-*.json" % op)))
        if not files:
            continue
        print("## %s\n" % op)
        print("| shape | dtype | kernel us | PyTorch us | compile us | "
              "copy us | PyTorch / kernel | kernel / copy |")
        print("|---|---|--:|--:|--:|--:|--:|--:|")
        for f in files:
            try:
                for r in rows(f):
                    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        r[0], r[1], fmt(r[2]), fmt(r[3]), fmt(r[4]),
                        fmt(r[5]), fmt(r[6]), fmt(r[7])))
            except (OSError, ValueError) as e:
                print("| %s | | unreadable: %s | | | | | |" %
                      (os.path.basename(f), e))
        for f in sorted(glob.glob(os.path.join(d, "%s-*.err" % op))):
            with open(f) as g:
                for line in g:
                    if line.strip():
                        print("\n%s: %s" % (os.path.basename(f),
                                             line.strip()))
        print()


if __name__ == "__main__":
    main()
