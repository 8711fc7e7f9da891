#!/usr/bin/env bash
# `sluice run --bad-samples FILE`: 40 JPEGs, 3 of them corrupted (truncated,
# empty with a Latin-1 name, text). skip over 2 epochs: the summary reports 6
# distinct bad samples (3 per epoch) and FILE (UTF-8) holds one JSON line per
# (epoch, corrupted file) with its index, path and reason, and the exact bytes
# of the name that is not UTF-8 in name_bytes_b64; stdout lists each bad file
# once, its name escaped (one name holds terminal escape sequences). fail: the
# run stops (exit 1) naming a corrupted path (escaped on stderr too), and FILE
# lists exactly the bad samples the summary counts.
# Usage: bad_samples.sh SLUICE MAKE_DATASET SPEC
set -euo pipefail
sluice=$1 make_dataset=$2 spec=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sluice" compile "$spec" -o "$tmp/skip.plan" >/dev/null
"$make_dataset" "$tmp/data" --images 40 --classes 2 --seed 3 >/dev/null
mapfile -t files < <(find "$tmp/data" -type f | sort)
test "${#files[@]}" -eq 40 || { echo "expected 40 files, got ${#files[@]}"; exit 1; }
# The empty file gets a Latin-1 name (not UTF-8): the list keeps its bytes.
# The truncated one's name holds terminal escape sequences: printed escaped.
latin1="$(dirname "${files[17]}")/$(printf 'caf\xe9.jpg')"
escapes="$(dirname "${files[4]}")/$(printf 'evil\033[31mRED\033[0m.jpg')"
rm "${files[17]}"
bad=("$escapes" "$latin1" "${files[30]}")
head -c 200 "${files[4]}" >"$escapes" && rm "${files[4]}"
: >"$latin1"
echo "not a jpeg" >"${files[30]}"
printf '%s\n' "${bad[@]}" | sort >"$tmp/bad.txt"

# skip (the spec's policy), 2 epochs of 10 batches: every sample is read.
"$sluice" run "$tmp/skip.plan" --var DATA="$tmp/data" --epochs 2 --threads 2 \
  --bad-samples "$tmp/skip.jsonl" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
grep -q '^bad samples: *6 distinct (' "$tmp/out" || { cat "$tmp/out"; echo "want 6 distinct"; exit 1; }
grep -q "^bad-sample list: $tmp/skip.jsonl (6 lines)" "$tmp/out" || { cat "$tmp/out"; exit 1; }
# stdout: each bad file once (not each bad read), escape bytes and non-UTF-8
# bytes as \xNN, so no escape sequence reaches the terminal.
python3 - "$tmp/out" "$tmp/bad.txt" <<'EOF'
import sys
out = open(sys.argv[1], "rb").read()
bad = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
assert b"\x1b" not in out, out
listed = [l[2:].split(b": ")[0] for l in out.splitlines() if l.startswith(b"  /")]
shown = sorted(b.replace(b"\x1b", b"\\x1b").replace(b"\xe9", b"\\xe9") for b in bad)
assert sorted(listed) == shown, (listed, shown)
EOF
python3 - "$tmp/skip.jsonl" "$tmp/bad.txt" <<'EOF'
import base64, json, sys
raw = open(sys.argv[1], "rb").read()
raw.decode("utf-8")  # the list is UTF-8 whatever the names
lines = [json.loads(l) for l in raw.splitlines()]
bad = sorted(open(sys.argv[2], "rb").read().split(b"\n")[:-1])
def exact(l):  # a name's bytes: name_bytes_b64 when it is not UTF-8
    return base64.b64decode(l["name_bytes_b64"]) if "name_bytes_b64" in l else l["name"].encode()
for epoch in (0, 1):
    got = [l for l in lines if l["epoch"] == epoch]
    assert sorted(exact(l) for l in got) == bad, (epoch, got)
    assert [l["sample"] for l in got] == sorted(l["sample"] for l in got), got
    for l in got:
        fields = {"epoch", "sample", "name", "reason"}
        if l["name"].endswith("caf\ufffd.jpg"):
            fields.add("name_bytes_b64")
        assert set(l) == fields, l
        assert l["reason"] and l["name"] not in l["reason"], l
EOF

# fail: the first batch holding a corrupted file stops the run.
cp -r "$tmp/skip.plan" "$tmp/fail.plan"
sed -i 's/"policy": "skip"/"policy": "fail"/' "$tmp/fail.plan/plan.json"
if "$sluice" run "$tmp/fail.plan" --var DATA="$tmp/data" --threads 2 \
  --bad-samples "$tmp/fail.jsonl" >"$tmp/out" 2>"$tmp/err"; then
  echo "fail policy: the run should stop"; exit 1
fi
n=$(wc -l <"$tmp/fail.jsonl")
test "$n" -ge 1 || { echo "fail: empty bad-sample list"; exit 1; }
grep -q "^bad samples: *$n distinct ($n bad reads" "$tmp/out" || { cat "$tmp/out"; exit 1; }
python3 - "$tmp/fail.jsonl" "$tmp/bad.txt" "$tmp/err" <<'EOF'
import base64, json, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
bad = open(sys.argv[2], "rb").read().split(b"\n")[:-1]
err = open(sys.argv[3], "rb").read()
def exact(l):
    return base64.b64decode(l["name_bytes_b64"]) if "name_bytes_b64" in l else l["name"].encode()
def shown(b):  # as stderr shows a name: escaped
    return b.replace(b"\x1b", b"\\x1b").replace(b"\xe9", b"\\xe9")
assert all(exact(l) in bad and l["epoch"] == 0 for l in lines), lines
assert b"\x1b" not in err, err
assert any(shown(exact(l)) in err for l in lines), (lines, err)
EOF
echo ok
