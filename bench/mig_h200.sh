#!/usr/bin/env bash
# MIG for real on a GPU node: partition one GPU, read its instances through the bundled exporter beside
# nvidia-smi, attribute one instance to a job with a `<gpu>.<gi>` job-mapping file, then destroy the instances
# and turn MIG off again, whatever happened (trap EXIT).
#
#   sudo bench/mig_h200.sh [GPU_INDEX]     # from the repository root; GPU 0 by default; needs root and an idle GPU
#
# Python: python3 with nvidia-ml-py (and prometheus-client) installed; click and pyyaml come from the wheels in
# .bench/wheels when they are not installed. Exit 0 when every instance nvidia-smi lists is published with its
# GPU_I_ID and GPU_I_PROFILE and the job's instance carries hpc_job; 1 otherwise.
set -euo pipefail

GPU=${1:-0}
PY=${PYTHON:-python3}
PORT=${PORT:-9499}
JOB=4242
WORK=$(mktemp -d)
EXPORTER_PID=""
ENABLED_HERE=0

cleanup() {
  local rc=$?
  set +e
  if [ -n "$EXPORTER_PID" ]; then
    kill "$EXPORTER_PID" 2>/dev/null
    wait "$EXPORTER_PID" 2>/dev/null
  fi
  if [ "$ENABLED_HERE" = 1 ]; then
    echo "== cleanup: destroy the compute and GPU instances, MIG off =="
    nvidia-smi mig -i "$GPU" -dci
    nvidia-smi mig -i "$GPU" -dgi
    nvidia-smi -i "$GPU" -mig 0
    echo "MIG mode now: $(nvidia-smi -i "$GPU" --query-gpu=mig.mode.current --format=csv,noheader)"
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== $(date -u +%FT%TZ) $(nvidia-smi -i "$GPU" --query-gpu=name,driver_version --format=csv,noheader) =="

if ! "$PY" -c 'import click, yaml' 2>/dev/null; then
  "$PY" -m pip install -q --no-index --find-links .bench/wheels --target "$WORK/site" click pyyaml
fi
export PYTHONPATH="$PWD:$WORK/site${PYTHONPATH:+:$PYTHONPATH}"

before=$(nvidia-smi -i "$GPU" --query-gpu=mig.mode.current --format=csv,noheader)
if [ "$before" != "Disabled" ]; then  # its instances may be in use: tearing them down is not this script's call
  echo "MIG mode of GPU $GPU is '$before', not Disabled: this script partitions an idle GPU and destroys every" \
       "instance when it ends; run it on a GPU with MIG off"
  exit 2
fi
echo "== MIG on GPU $GPU =="
ENABLED_HERE=1  # from here on, cleanup turns MIG off again, whatever happens
nvidia-smi -i "$GPU" -mig 1
mode=$(nvidia-smi -i "$GPU" --query-gpu=mig.mode.current --format=csv,noheader)
echo "MIG mode now: $mode"
[ "$mode" = "Enabled" ] || { echo "MIG is not enabled (a reset may be pending): stopping"; exit 1; }

echo "== the GPU instance profiles it offers (nvidia-smi mig -lgip) =="
nvidia-smi mig -i "$GPU" -lgip
profile_id() {  # the id of the first profile named "MIG <slices>g.<GB>gb" (no +me variant)
  nvidia-smi mig -i "$GPU" -lgip | awk -v want="^$1g\\.[0-9]+gb$" '$3 == "MIG" && $4 ~ want {print $5; exit}'
}
one=$(profile_id 1)
three=$(profile_id 3)
[ -n "$one" ] || { echo "no 1g profile listed: stopping"; exit 1; }
profiles="$one,$one${three:+,$three}"
echo "== creating GPU instances $profiles, each with its compute instance =="
nvidia-smi mig -i "$GPU" -cgi "$profiles" -C

echo "== nvidia-smi -L =="
nvidia-smi -L
echo "== nvidia-smi mig -lgi =="
nvidia-smi mig -i "$GPU" -lgi | tee "$WORK/lgi.txt"
# | GPU  Name  Profile ID  Instance ID  Placement |: the first 1g instance goes to the job
gi=$(awk -v gpu="$GPU" '$2 == gpu && $3 == "MIG" && $4 ~ /^1g\./ {print $6; exit}' "$WORK/lgi.txt")
listed=$(awk -v gpu="$GPU" '$2 == gpu && $3 == "MIG" {print $6 "=" $4}' "$WORK/lgi.txt" | sort -u | tr '\n' ' ')
echo "instances by nvidia-smi: $listed; job $JOB gets GPU instance $gi"
mkdir -p "$WORK/jobs"
echo "$JOB" > "$WORK/jobs/$GPU.$gi"

echo "== the exporter on NVML (slow loop every 2 s), job mapping $WORK/jobs =="
"$PY" -m gpudash exporter --listen "127.0.0.1:$PORT" --slow-interval 2s --hostname mig-bench \
  --hpc-job-mapping-dir "$WORK/jobs" > "$WORK/exporter.log" 2>&1 &
EXPORTER_PID=$!

status=0
"$PY" - "$PORT" "$GPU" "$gi" "$JOB" "$listed" "$EXPORTER_PID" <<'PYEOF' || status=$?
import pathlib, re, sys, time, urllib.request

port, gpu, gi, job, listed, pid = sys.argv[1:7]


def exporter_gone() -> bool:
    status = pathlib.Path(f"/proc/{pid}/status")
    return not status.exists() or "\tZ" in status.read_text()


expected = dict(item.split("=", 1) for item in listed.split())  # GPU instance id -> profile, as nvidia-smi lists
url = f"http://127.0.0.1:{port}/metrics"
text, deadline = "", time.monotonic() + 90
while time.monotonic() < deadline:
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        if exporter_gone():
            print("the exporter exited (its log is below)")
            break
        time.sleep(0.5)
        continue
    # two reads of the slow loop: memory at once, the GPM activity after its window
    if "GPU_I_ID" in text and re.search(r'DCGM_FI_PROF_GR_ENGINE_ACTIVE\{[^}]*GPU_I_ID', text):
        break
    time.sleep(0.5)
lines = [line for line in text.splitlines() if "GPU_I_ID" in line]
print(f"== /metrics: MIG instance series of GPU {gpu} ({len(lines)} lines) ==")
print("\n".join(lines))
print("== /metrics: fields this GPU cannot give in MIG mode ==")
print("\n".join(line for line in text.splitlines() if line.startswith("gpudash_exporter_field_unsupported")))
published = {}
for line in lines:
    labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.index("}")]))
    if labels.get("gpu") == gpu:
        published[labels["GPU_I_ID"]] = labels["GPU_I_PROFILE"]
jobs = {dict(re.findall(r'(\w+)="([^"]*)"', line))["GPU_I_ID"] for line in lines if f'hpc_job="{job}"' in line}
ok = published == expected and jobs == {gi}
print(f"instances by nvidia-smi: {expected}")
print(f"instances by the exporter: {published}")
print(f"instances labelled hpc_job={job}: {sorted(jobs)} (its mapping file: {gpu}.{gi})")
print("RESULT:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PYEOF

echo "== nvidia-smi (its MIG devices table, memory per instance) =="
nvidia-smi -i "$GPU"
echo "== exporter log =="
cat "$WORK/exporter.log"
exit "$status"
