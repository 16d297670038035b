#!/bin/sh
# Write Prometheus file_sd targets for every Slurm node with GPUs (a `gpu` GRES), one file per cluster:
#   gpu-nodes-from-sinfo.sh CLUSTER [OUT_DIR] [PORT]
# e.g. from a systemd timer or cron on the Prometheus host, every few minutes:
#   gpu-nodes-from-sinfo.sh prod-a /etc/prometheus/file_sd 9400
# The file is replaced in one rename, so Prometheus never reads half of it; when sinfo fails or lists no
# GPU node, the old file stays and the script exits non-zero. The rack label is the node's first feature
# that starts with "rack" (sinfo %f), or "unknown".
set -eu
cluster=${1:?usage: gpu-nodes-from-sinfo.sh CLUSTER [OUT_DIR] [PORT]}
out=${2:-/etc/prometheus/file_sd}
port=${3:-9400}
case $cluster in *[!A-Za-z0-9_.-]*) echo "gpu-nodes-from-sinfo.sh: cluster name must be A-Za-z0-9_.-: $cluster" >&2; exit 2;; esac

nodes=$(sinfo --noheader --Node --format '%N %G %f') || { echo "gpu-nodes-from-sinfo.sh: sinfo failed" >&2; exit 1; }
json=$(printf '%s\n' "$nodes" | awk -v cluster="$cluster" -v port="$port" '
  $2 ~ /(^|,)gpu(:|,|$|\()/ && !seen[$1]++ {
    rack = "unknown"
    n = split($3, features, ",")
    for (i = 1; i <= n; i++) if (features[i] ~ /^rack/) { rack = features[i]; break }
    by_rack[rack] = by_rack[rack] (by_rack[rack] == "" ? "" : ", ") "\"" $1 ":" port "\""
    count++
  }
  END {
    if (count == 0) exit 3
    printf "["
    sep = ""
    for (rack in by_rack) {
      printf "%s\n  {\"targets\": [%s], \"labels\": {\"cluster\": \"%s\", \"rack\": \"%s\"}}", sep, by_rack[rack], cluster, rack
      sep = ","
    }
    printf "\n]\n"
  }') || { echo "gpu-nodes-from-sinfo.sh: sinfo lists no node with a gpu GRES; $out/gpu-nodes-$cluster.json left as it was" >&2; exit 1; }

mkdir -p "$out"
tmp=$(mktemp "$out/.gpu-nodes-$cluster.XXXXXX")
printf '%s' "$json" > "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$out/gpu-nodes-$cluster.json"
