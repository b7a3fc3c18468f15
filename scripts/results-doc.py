#!/usr/bin/env python3
"""results-doc.py: one op's results page from a scripts/judge.sh directory.

    scripts/results-doc.py JUDGE_DIR OUT.md [--anchors ANCHORS.md]
                           [--bench FILE] [--note TEXT] [--label TEXT]

JUDGE_DIR holds what judge.sh wrote (report.md, report.svg, bench.txt,
log.txt).  OUT.md gets: the tip against the first starter at the bench
shape in f16 and bf16 with the roofline and the PyTorch and AutoKernel
figures of ANCHORS.md beside them; every test shape, tip against starter;
then the tool's own report, its plot copied beside OUT.md as <op>.svg.
Numbers are only copied from the files, never computed anew, except the
ratios between two of them.  --bench takes the timings from FILE instead
of JUDGE_DIR/bench.txt (a `bench A --all-shapes --against B` output);
--note adds a paragraph under the title; --label names the first
kernel's column ("kept kernel").
"""
import os
import re
import shutil
import sys

ANCHOR_COLS = ["PyTorch eager", "torch.compile", "fused PyTorch op",
               "AutoKernel starter (Triton)", "same-size copy"]


def anchors(path):
    """op -> {column: text} from ANCHORS.md's table."""
    rows = {}
    if not path or not os.path.exists(path):
        return rows
    head = None
    for line in open(path):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "op":
            head = cells
            continue
        if head is None or set(cells[0]) <= set("-: "):
            continue
        op = cells[0].split()[0]
        rows[op] = dict(zip(head, cells))
    return rows


SHAPE = re.compile(r"^(\S+) (f16|bf16|f32): floor ([\d.]+) us \((\w+); ([\d.]+) MB moved\)")
ROW = re.compile(r"^  (.+?)\s+([\d.]+) us\s+([\d.]+) us\s+(?:([\d.]+)%\s+)?(\d+)$")


def benches(path):
    """[(shape, dtype, floor, kind, {label: (median, iqr)})] from bench.txt."""
    out, cur = [], None
    for line in open(path):
        m = SHAPE.match(line)
        if m:
            cur = (m.group(1), m.group(2), float(m.group(3)), m.group(4), {})
            out.append(cur)
            continue
        m = ROW.match(line.rstrip("\n"))
        if m and cur is not None:
            label = m.group(1).strip()
            label = "copy" if label.startswith("copy") else label
            cur[4][label] = (float(m.group(2)), float(m.group(3)))
    return out


def tip_base(times):
    """(tip, base) timings: the tip is the first row, the starter the second."""
    labels = [k for k in times if k != "copy"]
    return times[labels[0]], times[labels[1]] if len(labels) > 1 else None


def main():
    args = sys.argv[1:]
    opts = {}
    for name in ("--anchors", "--bench", "--note", "--label"):
        if name in args:
            i = args.index(name)
            opts[name] = args[i + 1]
            del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    src, dst = args
    anchors_path = opts.get("--anchors")
    label = opts.get("--label", "kept kernel")
    report = open(os.path.join(src, "report.md")).read()
    op = re.search(r"^## autokernel/(\S+):", report, re.M).group(1)
    shapes = benches(opts.get("--bench", os.path.join(src, "bench.txt")))
    anc = anchors(anchors_path).get(op, {})
    lines = []
    w = lines.append
    w(f"# {op} on an NVIDIA H200\n")
    w("Reached through the tool's own loop (`scripts/judge.sh`: `git "
      "autokernel start` from the first CUDA starter, candidates committed "
      "through the hooks, `run --agent tune`), then `git autokernel bench "
      "HEAD --against <baseline>`: the kept kernel and the first starter "
      "timed interleaved, beside a copy of the op's minimum traffic, in "
      "the same run.  Medians of CUDA events with the L2 flushed, in us.\n")
    if "--note" in opts:
        w(opts["--note"] + "\n")
    bench_rows = [s for s in shapes if s == shapes[0] or
                  (s[1] == "bf16" and s[0] == shapes[0][0])]
    w(f"| dtype | shape | {label} | first starter | speedup | floor | "
      "% of floor | " + " | ".join(ANCHOR_COLS[:4]) + " |")
    w("|---|---|--:|--:|--:|--:|--:|" + "--:|" * 4)
    for shape, dt, floor, kind, times in bench_rows:
        tip, base = tip_base(times)
        sp = f"{base[0] / tip[0]:.2f}x" if base else ""
        a = [anc.get(c, "") if dt == "f16" else "" for c in ANCHOR_COLS[:4]]
        w(f"| {dt} | {shape} | **{tip[0]:.2f}** | "
          f"{base[0]:.2f} | {sp} | {floor:.2f} ({kind}) | "
          f"{100 * floor / tip[0]:.0f}% | " + " | ".join(a) + " |")
    w("\nThe PyTorch and AutoKernel columns are ANCHORS.md's (f16, the same "
      "GPU model, the same method), not re-measured in this run; the floor "
      "is: for memory-bound ops a device copy of the same number of bytes, "
      "for matmul and fused_mlp the flops over the bf16 matrix rate `git "
      "autokernel init` measured with cuBLAS.\n")
    w("## Every test shape (f16)\n")
    w(f"| shape | {label} | first starter | ratio | floor | % of floor |")
    w("|---|--:|--:|--:|--:|--:|")
    for shape, dt, floor, kind, times in shapes:
        if dt != "f16":
            continue
        tip, base = tip_base(times)
        ratio = f"{tip[0] / base[0]:.2f}" if base else ""
        w(f"| {shape} | {tip[0]:.2f} | {base[0]:.2f} | {ratio} | "
          f"{floor:.2f} | {100 * floor / tip[0]:.0f}% |")
    w(f"\nratio: the {label}'s time over the first starter's (under 1 "
      "is faster).  Shapes this small are a few microseconds of launch and "
      "ramp; differences under ~0.3 us are noise.\n")
    svg = os.path.join(os.path.dirname(os.path.abspath(dst)), f"{op}.svg")
    shutil.copyfile(os.path.join(src, "report.svg"), svg)
    body = report.replace("](report.svg)", f"]({op}.svg)")
    body = re.sub(r"^## ", "## The tool's report: ", body, count=1, flags=re.M)
    w(body)
    open(dst, "w").write("\n".join(lines))


if __name__ == "__main__":
    main()
