#!/usr/bin/env python3
"""results-table.py STARTERS.json [TRITON.json]: the markdown table of the
nine CUDA starters (f16 and bf16 at the bench shape: time, % of the floor)
with the ANCHORS.md figures beside them, and with TRITON.json the Triton
starters' times in a column of their own.  STARTERS.json is what
tests/gpu/t0620-cuda-starters.sh collects with AK_RESULTS set, TRITON.json
what tests/gpu/t0650-triton.sh collects with AK_RESULTS_TRITON set."""
import json
import sys

# ANCHORS.md (H200, fp16, us): eager, torch.compile, fused op, AutoKernel
ANCHORS = {
    "softmax": ("58.9", "44.0", "", "21.3"),
    "layernorm": ("21.7", "17.2", "", "37.1 (fails)"),
    "rmsnorm": ("129.8", "23.8", "26.8", "26.6 (fails)"),
    "cross_entropy": ("267.5", "186.4", "", "124.6"),
    "reduce": ("57.8", "36.4", "", "62.7"),
    "rotary_embedding": ("109.7", "53.5", "", "fails"),
    "flash_attention": ("559", "172.6", "38.1 (SDPA)", "76.5"),
    "matmul": ("28.2 (cuBLAS)", "36.9", "", "49.0 (fails)"),
    "fused_mlp": ("241.6", "226.1", "", "283.8 (fails)"),
}
OPS = ["softmax", "layernorm", "rmsnorm", "cross_entropy", "reduce",
       "rotary_embedding", "flash_attention", "matmul", "fused_mlp"]


def times(d, op):
    """The f16 (the note's) and bf16 medians of op's starter in d."""
    n, b = d.get("note-%s.json" % op), d.get("bench-bf16-%s.json" % op)
    f16 = n["bench"]["kernels"][0]["median_us"] if isinstance(n, dict) \
        else None
    bf16 = b["kernels"][0]["median_us"] if isinstance(b, dict) else None
    return ["%.2f" % t if t else "" for t in (f16, bf16)]


def main():
    d = json.load(open(sys.argv[1]))
    tr = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
    dev = None
    print("| op | shape | f16 us | f16 % floor | bf16 us | bf16 % floor "
          + ("| Triton f16 us | Triton bf16 us " if tr else "")
          + "| floor us | eager | torch.compile | fused op | AutoKernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|"
          + ("---|---|" if tr else ""))
    for op in OPS:
        n = d.get("note-%s.json" % op)
        b = d.get("bench-bf16-%s.json" % op)
        if not isinstance(n, dict):
            print("| %s | not measured | | | | | | | | | |%s" %
                  (op, " | |" if tr else ""))
            continue
        dev = n.get("device", {})
        f = n["bench"]
        k = f["kernels"][0]
        row = [op, f["shape"], "%.2f" % k["median_us"],
               "%.0f%%" % (100 * k["roofline"])]
        if isinstance(b, dict):
            kb = b["kernels"][0]
            row += ["%.2f" % kb["median_us"], "%.0f%%" % (100 * kb["roofline"])]
        else:
            row += ["", ""]
        if tr:
            row += times(tr, op)
        row += ["%.2f (%s)" % (f["floor_us"], f["floor_kind"])]
        row += list(ANCHORS[op])
        print("| " + " | ".join(row) + " |")
    if dev:
        print("\nDevice: %s, driver %s, runtime %s, %s SMs, clocks %s/%s MHz."
              % (dev.get("name"), dev.get("driver_version"),
                 dev.get("runtime_version"), dev.get("sms"),
                 dev.get("clock_mhz"), dev.get("mem_clock_mhz")))


main()
