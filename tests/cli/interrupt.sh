#!/usr/bin/env bash
# Ctrl-C during `sluice run --trace F --report R --bad-samples B`: the run
# stops between batches, then finishes as usual and exits 130: F is complete
# trace JSON with events, R is the HTML report saying "interrupted", B is
# written, and the summary is printed (docs/observability.md).
# Usage: interrupt.sh SLUICE MAKE_DATASET SPEC
set -euo pipefail
sluice=$1 make_dataset=$2 spec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sluice" compile "$spec" -o "$tmp/run.plan" >/dev/null
"$make_dataset" "$tmp/data" --images 40 --classes 2 --seed 3 >/dev/null
echo "old" >"$tmp/trace.json"  # replaced at the end, not truncated at the start
python3 - "$sluice" "$tmp" <<'PY'
import json, os, signal, subprocess, sys, time
sluice, tmp = sys.argv[1], sys.argv[2]
cmd = [sluice, "run", f"{tmp}/run.plan", "--var", f"DATA={tmp}/data", "--epochs", "1000000",
       "--threads", "2", "--trace", f"{tmp}/trace.json", "--report", f"{tmp}/report.html",
       "--bad-samples", f"{tmp}/bad.jsonl"]
# SIGINT is ignored in a script's background jobs: give the run the default.
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
time.sleep(2)
assert p.poll() is None, ("the run ended early", p.communicate())
assert open(f"{tmp}/trace.json").read() == "old\n", "trace file changed during the run"
assert not os.path.exists(f"{tmp}/report.html"), "report file created before the end"
p.send_signal(signal.SIGINT)
try:
    out, err = p.communicate(timeout=60)
except subprocess.TimeoutExpired:
    p.kill()
    sys.exit("the run did not stop within 60 s of SIGINT")
out, err = out.decode(), err.decode()
assert p.returncode == 130, (p.returncode, out, err)
assert "interrupted after" in err, err
assert "images/s:" in out and "report:" in out and "trace:" in out, out
trace = json.load(open(f"{tmp}/trace.json"))
assert sum(e["ph"] == "X" for e in trace["traceEvents"]) > 0, "no spans in the trace"
assert not os.path.exists(f"{tmp}/trace.json.tmp")
html = open(f"{tmp}/report.html").read()
assert html.lstrip().lower().startswith("<!doctype html"), html[:100]
assert "interrupted" in html, "the report does not say the run was interrupted"
assert os.path.exists(f"{tmp}/bad.jsonl")
PY
echo ok
