#!/bin/sh
# gpudash-slurm-node-state.sh: Slurm's drain and maintenance state of every node, for node_exporter's textfile
# collector. Writes, all at once (a temporary file renamed), one series per node Slurm knows:
#
#   gpudash_slurm_node_drained{node="<NodeName>"} 1   the node's state has the DRAIN flag (draining or drained)
#                                                     or MAINT (a maintenance reservation)
#   gpudash_slurm_node_drained{node="<NodeName>"} 0   otherwise
#
# gpudash's GPUNodeDrained alert (source slurm) joins `node` to the GPU exporter's instance, and Alertmanager
# then holds back that node's GPU alerts. Run it every minute on one host that can reach slurmctld and whose
# node_exporter reads the textfile folder (the controller, say): a systemd timer or cron.
#
# If scontrol fails, the file is removed rather than left stale: the alert then ends and the node's alerts
# notify again (failing open: a page too many, never one held back by a state nobody reads any more).
#
# Settings (environment): GPUDASH_TEXTFILE_DIR (default /var/lib/prometheus/node-exporter, Debian's
# node_exporter textfile folder), GPUDASH_SCONTROL (default scontrol).
set -u
dir=${GPUDASH_TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}
scontrol=${GPUDASH_SCONTROL:-scontrol}
out="$dir/gpudash_slurm_node_state.prom"
tmp="$dir/.gpudash_slurm_node_state.prom.$$"
trap 'rm -f "$tmp" "$tmp.raw"' EXIT

if ! "$scontrol" --oneliner show node > "$tmp.raw"; then
    echo "gpudash-slurm-node-state: scontrol failed; removed $out" >&2
    rm -f "$out"
    exit 1
fi
awk '
BEGIN {
    print "# HELP gpudash_slurm_node_drained 1 while Slurm has the node draining, drained or in maintenance (DRAIN or MAINT), else 0."
    print "# TYPE gpudash_slurm_node_drained gauge"
}
{
    name = ""; state = ""
    for (i = 1; i <= NF; i++) {
        if ($i ~ /^NodeName=/) name = substr($i, 10)
        else if ($i ~ /^State=/) state = substr($i, 7)
    }
    if (name == "") next
    gsub(/\\/, "\\\\", name); gsub(/"/, "\\\"", name)
    drained = ("+" state "+") ~ /\+(DRAIN|DRAINING|DRAINED|MAINT)\+/ ? 1 : 0
    printf "gpudash_slurm_node_drained{node=\"%s\"} %d\n", name, drained
}' "$tmp.raw" > "$tmp" && chmod 0644 "$tmp" && mv "$tmp" "$out"
