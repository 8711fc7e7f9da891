#!/usr/bin/env bash
# Remote shards (issue 16 item 5): the ImageNet train spec
# (examples/imagenet_train_shards.yaml) over the same `sluice pack` shards read
#   local      from the local directory;
#   s3         as s3:// URLs (SigV4-signed, path-style requests) from nginx on
#              loopback (bench/remote/nginx.conf.in), serving the objects as
#              an S3 endpoint serves GET and HEAD (signatures not checked);
#   http       the same objects from the same nginx as plain http:// URLs
#              (no SigV4 signing: what signing costs per request);
#   s3_shuffle_io1, s3_shuffle_c32   s3 on one curl event loop, and with 32
#              connections (32 prefetched requests);
#   s3_slow_*  the same through a second nginx server that delays a random 1%
#              of requests by 1 s, with hedging on (auto: the observed p95)
#              and off (remote.hedge_delay_s: 0);
#   moto_*     from moto's S3 server (tests/remote/fixtures/serve.py, IAM auth
#              on: signatures checked), which is Python and answers only
#              ~100-200 requests/s here. MOTO=0 leaves these rows out.
# `order: shuffle` (one range request per sample, coalesced when neighbours,
# prefetched) and `order: shard_shuffle` (whole shards streamed, read-ahead).
# Contenders are interleaved round by round; bench/remote/summarize.py prints
# medians and same-run ratios. A benchmark, not a test. Needs nginx and its
# echo module: apt-get install nginx-light libnginx-mod-http-echo.
#
#   bench/remote/run.sh [--no-build]
#
# Environment: BUILD [build-bench], THREADS [nproc], WARMUP [2], BATCHES [16],
#   IMAGES [(WARMUP+BATCHES+1)*256], SHARD_SIZE [32MB], ROUNDS [3], SEED [1],
#   MOTO [1], ONLY [a regex: run only the contenders whose names match],
#   PERF_DIR [unset: a directory for one `perf record -g` file per run],
#   WORK [$BUILD/remote], LOG [$WORK/results.log], PLANS_ONLY [0: 1 writes the
#   plans into $WORK and stops], NGINX [nginx], NGINX_ECHO_MODULE
#   [/usr/lib/nginx/modules/ngx_http_echo_module.so], PYTHON [/usr/bin/python3],
#   LOADER_CPUS / SERVER_CPUS [unset: taskset CPU lists for the loader and for
#   nginx, e.g. 0-1 and 2-3: a 2-core client whose server has cores of its own].
# Without $BUILD/sluice (bench/remote/device_kit.sh: a folder to run this on
# another machine), the shards are written by bench/remote/tar_folder.py
# (Python's tarfile; tar_shards indexes them on first open) and the plans must
# already be in $BUILD/remote.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build-bench}"
THREADS="${THREADS:-$(nproc)}"
WARMUP="${WARMUP:-2}"
BATCHES="${BATCHES:-16}"
IMAGES="${IMAGES:-$(((WARMUP + BATCHES + 1) * 256))}"
SHARD_SIZE="${SHARD_SIZE:-32MB}"
ROUNDS="${ROUNDS:-3}"
SEED="${SEED:-1}"
MOTO="${MOTO:-1}"
WORK="${WORK:-$BUILD/remote}"
LOG="${LOG:-$WORK/results.log}"
NGINX="${NGINX:-nginx}"
NGINX_ECHO_MODULE="${NGINX_ECHO_MODULE:-/usr/lib/nginx/modules/ngx_http_echo_module.so}"
PYTHON="${PYTHON:-/usr/bin/python3}"
# Command prefixes that pin the loader and nginx (taskset execs the command,
# so $! stays the server's pid).
loader_pin=()
server_pin=()
[[ -z "${LOADER_CPUS:-}" ]] || loader_pin=(taskset -c "$LOADER_CPUS")
[[ -z "${SERVER_CPUS:-}" ]] || server_pin=(taskset -c "$SERVER_CPUS")
SERVE=tests/remote/fixtures/serve.py

if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$THREADS" --target sluice sluice_make_dataset sluice_e2e_loader
fi
mkdir -p "$WORK"

# Plans: shuffle (hedging auto), shuffle with hedging off, shuffle on one curl
# event loop (io_threads 1: what the auto count of loops buys on a many-core
# machine), shuffle with 32 connections (so 32 prefetched requests), shard_shuffle.
spec=examples/imagenet_train_shards.yaml
with_remote() {  # NAME KNOBS: the spec with `remote: {KNOBS}` under its path
  sed "s/^  path: \\\${DATA}.*/  path: \${DATA}\\n  remote: {$2}/" "$spec" >"$WORK/$1.yaml"
}
cp "$spec" "$WORK/shuffle.yaml"
with_remote nohedge "hedge_delay_s: 0"
with_remote shuffle_io1 "io_threads: 1"
with_remote shuffle_c32 "max_connections: 32"
sed 's/^  order: shuffle/  order: shard_shuffle/' "$spec" >"$WORK/shard_shuffle.yaml"
for p in shuffle nohedge shuffle_io1 shuffle_c32 shard_shuffle; do
  if [[ -x "$BUILD/sluice" ]]; then
    "$BUILD/sluice" compile "$WORK/$p.yaml" -o "$WORK/$p.plan" >&2
  elif [[ ! -d "$WORK/$p.plan" ]]; then
    echo "bench/remote: no $BUILD/sluice to compile $WORK/$p.plan" >&2
    exit 1
  fi
done
[[ "${PLANS_ONLY:-0}" != 1 ]] || exit 0

STAMP="images=$IMAGES seed=$SEED shard_size=$SHARD_SIZE restart_markers=1"
if [[ "$(cat "$WORK/.params" 2>/dev/null)" != "$STAMP" ]]; then
  rm -rf "$WORK/folder" "$WORK/shards"
  "$BUILD/sluice_make_dataset" "$WORK/folder" --images "$IMAGES" --classes 10 --seed "$SEED" >&2
  if [[ -x "$BUILD/sluice" ]]; then
    "$BUILD/sluice" pack "$WORK/folder" -o "$WORK/shards" --shard-size "$SHARD_SIZE" >&2
  else
    "$PYTHON" bench/remote/tar_folder.py "$WORK/folder" "$WORK/shards" \
      --shard-size "$(size="${SHARD_SIZE%B}" && numfmt --from=iec "${size%i}")" >&2  # MB = MiB, as pack
  fi
  echo "$STAMP" >"$WORK/.params"
fi
nshards=$(find "$WORK/shards" -name 'shard-*.tar' | wc -l)
last=$(printf '%06d' $((nshards - 1)))

for tool in "$NGINX" "$NGINX_ECHO_MODULE"; do
  if ! command -v "$tool" >/dev/null && [[ ! -e "$tool" ]]; then
    echo "bench/remote: needs nginx and its echo module: apt-get install nginx-light libnginx-mod-http-echo" >&2
    exit 1
  fi
done

# Servers: each exits when its stdin (a `sleep` pipe) closes, or is killed.
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  kill "$(cat "$WORK/nginx/nginx.pid" 2>/dev/null)" 2>/dev/null || true
  return 0
}
trap cleanup EXIT
start() {  # name args... -> $WORK/name.json holds the server's JSON line
  rm -f "$WORK/$1.json"
  sleep infinity | "$PYTHON" "$SERVE" "${@:2}" >"$WORK/$1.json" &
  pids+=($!)
  for _ in $(seq 600); do
    [[ -s "$WORK/$1.json" ]] && return 0
    sleep 0.1
  done
  echo "bench/remote: $1 did not start" >&2
  exit 1
}
field() { "$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
free_port() { "$PYTHON" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])"; }

# nginx: bucket "bench" = the shard directory; one server as is, one that
# sleeps 1 s before serving a random 1% of requests (split_clients on the
# request id; the echo module's echo_sleep, then the file as usual).
ng="$(cd "$WORK" && pwd)/nginx"
rm -rf "$ng" && mkdir -p "$ng/root" "$ng/tmp"
ln -s "$(cd "$WORK/shards" && pwd)" "$ng/root/bench"
nginx_port=$(free_port)
slow_port=$(free_port)
# As root, the workers must read the shards as root too (nginx's default
# user, nobody, may not reach them); otherwise nginx ignores `user`.
user_line=""
[[ "$(id -u)" != 0 ]] || user_line="user root;"
sed -e "s|@NG@|$ng|g" -e "s|@PORT@|$nginx_port|g" -e "s|@SLOW_PORT@|$slow_port|g" \
  -e "s|@ECHO_MODULE@|$NGINX_ECHO_MODULE|g" -e "s|@USER_LINE@|$user_line|g" \
  bench/remote/nginx.conf.in >"$ng/nginx.conf"
"${server_pin[@]}" "$NGINX" -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log" &
pids+=($!)
for _ in $(seq 100); do
  "$PYTHON" -c "import socket,sys; socket.create_connection(('127.0.0.1',int(sys.argv[1])),1)" "$slow_port" 2>/dev/null && break
  sleep 0.1
done

if [[ "$MOTO" == 1 ]]; then
  start s3 s3 --root "$WORK/shards" --bucket bench
  moto_port=$(field "$WORK/s3.json" port)
  export AWS_ACCESS_KEY_ID="$(field "$WORK/s3.json" access_key)"
  export AWS_SECRET_ACCESS_KEY="$(field "$WORK/s3.json" secret_key)"
  export AWS_REGION="$(field "$WORK/s3.json" region)"
else
  export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1
fi
url="s3://bench/shard-{000000..$last}.tar"
http_url="http://127.0.0.1:$nginx_port/bench/shard-{000000..$last}.tar"  # the same objects, unsigned

# name plan data endpoint-port
CONTENDERS=(
  "local_shuffle shuffle $WORK/shards -"
  "s3_shuffle shuffle $url $nginx_port"
  "http_shuffle shuffle $http_url -"
  "s3_shuffle_io1 shuffle_io1 $url $nginx_port"
  "s3_shuffle_c32 shuffle_c32 $url $nginx_port"
  "s3_slow_hedge shuffle $url $slow_port"
  "s3_slow_nohedge nohedge $url $slow_port"
  "local_shard_shuffle shard_shuffle $WORK/shards -"
  "s3_shard_shuffle shard_shuffle $url $nginx_port"
)
if [[ "$MOTO" == 1 ]]; then
  CONTENDERS+=("moto_shuffle shuffle $url $moto_port" "moto_shard_shuffle shard_shuffle $url $moto_port")
fi
{
  echo "# $(date -u +%FT%TZ) $(uname -srm); $(nproc) CPUs; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# loader_cpus=${LOADER_CPUS:-all} server_cpus=${SERVER_CPUS:-all}"
  echo "# threads=$THREADS images=$IMAGES shards=$nshards shard_size=$SHARD_SIZE rounds=$ROUNDS batches=$BATCHES warmup=$WARMUP"
} >"$LOG"
for ((round = 1; round <= ROUNDS; ++round)); do
  echo "round $round/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  echo "LOAD $(cut -d' ' -f1-3 /proc/loadavg)" >>"$LOG"
  for c in "${CONTENDERS[@]}"; do
    read -r name plan data port <<<"$c"
    if [[ -n "${ONLY:-}" && ! "$name" =~ $ONLY ]]; then continue; fi
    if [[ "$port" == - ]]; then unset AWS_ENDPOINT_URL; else export AWS_ENDPOINT_URL="http://127.0.0.1:$port"; fi
    wrap=()  # PERF_DIR: profile each run (perf record -g, one file per run)
    [[ -z "${PERF_DIR:-}" ]] || wrap=(perf record -q -F 499 -g -o "$PERF_DIR/$name.$round.data" --)
    "${loader_pin[@]}" "${wrap[@]}" "$BUILD/sluice_e2e_loader" "$WORK/$plan.plan" "$data" --threads "$THREADS" \
      --batches "$BATCHES" --warmup "$WARMUP" --name "$name" |
      sed -n -e "s/^REMOTE /REMOTE $name /p" -e '/^RESULT /p' | tee -a "$LOG" >&2
  done
done
"$PYTHON" bench/remote/summarize.py "$LOG"
