#!/usr/bin/env bash
# Profiles `chorus serve` under load with py-spy; writes a flame graph (SVG), a speedscope JSON and
# a `py-spy dump` of the engine core to <out>/profile-<date>.* (default: the benchmarks package's
# results/, where `chorus-bench bench` writes too)
#
#   chorus-bench profile [--streams 8] [--seconds 30] [--out DIR] [-- extra `chorus serve` flags]
#   (also: python -m benchmarks profile ..., or benchmarks/profile.sh ... in a source tree)
#
# py-spy follows the engine core process with --subprocesses; it needs ptrace rights (root, or
# CAP_SYS_PTRACE in a container). Only 127.0.0.1 is used; everything stops by itself.
set -euo pipefail
# The interpreter with Chorus installed (`chorus-bench profile` passes its own).
PY="${PYTHON:-python}"
# py-spy installed beside that interpreter (a venv's bin/) when it is not on PATH.
PYSPY="$(dirname "$(command -v "$PY")")/py-spy"
[ -x "$PYSPY" ] || PYSPY=py-spy

STREAMS=8
SECONDS_UNDER_LOAD=30
PORT=${CHORUS_PROFILE_PORT:-8077}
RATE=100
# This script ships inside the benchmarks package: its folder's parent holds the packages (the source
# tree, or site-packages when installed). No cd: relative paths among the serve flags stay the caller's.
PACKAGES=$(cd "$(dirname "$0")/.." && pwd)
OUT="$PACKAGES/benchmarks/results"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --streams) STREAMS=$2; shift 2 ;;
    --seconds) SECONDS_UNDER_LOAD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --) shift; break ;;
    *) echo "unknown flag $1 (serve flags go after --)" >&2; exit 2 ;;
  esac
done

export PYTHONPATH="$PACKAGES${PYTHONPATH:+:$PYTHONPATH}"
STAMP=$(date -u +%Y-%m-%d-%H%M)
STEM="$OUT/profile-$STAMP"
WORK=$(mktemp -d)
mkdir -p "$OUT"

# The load is Orpheus-shaped (voice tara): tiny-random unless a later --model overrides it.
"$PY" -m api.cli serve --host 127.0.0.1 --port "$PORT" --model tiny-random "$@" >"$WORK/server.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

for _ in $(seq 1 240); do
  "$PY" - "$PORT" <<'PY' && break
import sys, httpx
try:
    sys.exit(0 if httpx.get(f"http://127.0.0.1:{sys.argv[1]}/ready", timeout=1).status_code == 200 else 1)
except httpx.HTTPError:
    sys.exit(1)
PY
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.5
done
CORE=$(grep -o 'engine core process started: pid [0-9]*' "$WORK/server.log" | grep -o '[0-9]*$' | head -1)
echo "server pid $SERVER, engine core pid ${CORE:-unknown}" >&2

# Two recorders, one per output format; each at RATE samples/s, idle threads left out.
"$PYSPY" record --pid "$SERVER" --subprocesses --rate "$RATE" --duration "$SECONDS_UNDER_LOAD" \
  --format flamegraph -o "$STEM.svg" >"$WORK/spy-svg.log" 2>&1 &
SPY_SVG=$!
"$PYSPY" record --pid "$SERVER" --subprocesses --rate "$RATE" --duration "$SECONDS_UNDER_LOAD" \
  --format speedscope -o "$STEM.speedscope.json" >"$WORK/spy-json.log" 2>&1 &
SPY_JSON=$!

if [[ -n "${CORE:-}" ]]; then
  (sleep "$((SECONDS_UNDER_LOAD / 2))"; "$PYSPY" dump --pid "$CORE" >"$STEM.dump.txt" 2>&1 || true) &
fi
"$PY" -m benchmarks.load --http "http://127.0.0.1:$PORT" --systems engine --concurrency "$STREAMS" \
  --level-seconds "$((SECONDS_UNDER_LOAD - 5))" --drain-seconds 5 --no-burst --no-plot --out "$WORK" >&2 || true
wait "$SPY_SVG" "$SPY_JSON" || { cat "$WORK"/spy-*.log >&2; exit 1; }
cp "$WORK"/load-*.md "$STEM.load.md" 2>/dev/null || true
echo "wrote $STEM.svg, $STEM.speedscope.json, $STEM.dump.txt, $STEM.load.md" >&2
