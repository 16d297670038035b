#!/bin/bash
# gpudash job mapping for Slurm: the Prolog writes, the Epilog clears, dcgm-exporter's job-mapping files.
#
# One file per GPU in the mapping directory, named by the GPU's NVML index (the exporter's `gpu` label), one
# job id per line; `gpudash exporter --hpc-job-mapping-dir DIR` (or dcgm-exporter with the same flag) then
# publishes each job's own copy of that GPU's series with hpc_job="<job id>". See docs/jobs.md.
#
# Install the same file twice (or link it): as prolog.d/50-gpudash-job-mapping.sh and as
# epilog.d/50-gpudash-job-mapping.sh; it writes when run as a Prolog and clears when run as an Epilog
# (SLURM_SCRIPT_CONTEXT, else the path it was started by, else its first argument: add | remove).
# Set PrologFlags=Alloc in slurm.conf, or the Prolog runs only when a node starts the job's first step.
#
# Which GPUs: UUIDs from CUDA_VISIBLE_DEVICES when Slurm puts them there (25.11+ with AutoDetect), else
# SLURM_JOB_GPUS (Slurm's GRES indices), else numeric CUDA_VISIBLE_DEVICES (shard/MPS). Slurm's index i is
# the i-th GPU in increasing device-minor order (gres.conf lists File=/dev/nvidiaN in increasing order), and
# the minor number is not the NVML index: each GPU is found by its PCI bus id in the driver's
# /proc/driver/nvidia/gpus/<bus id>/information ("Device Minor") and by its UUID or bus id in
# `nvidia-smi --query-gpu=index,uuid,pci.bus_id`. Never by /dev/nvidiaN order.
#
# Files are written atomically (a temporary name the exporter ignores, then rename) under a lock, and a job
# adds or removes only its own line, so jobs sharing a GPU (shard, MPS) keep each other's lines; an emptied
# file is removed. With Slurm 26.05, .sluid/<SLURM_JOB_SLUID> records the job id, so the exporter can name
# the job of a process whose cgroup carries the SLUID.
#
# Who holds the job: .jobinfo/<job id> records the job's user, account, partition and name (key=value lines,
# from SLURM_JOB_USER, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION and SLURM_JOB_NAME; what the environment lacks
# is asked of `scontrol show job`), which the exporter publishes as gpudash_job_info; the Epilog removes it.
#
# It never fails the job (a failing Prolog drains the node): every problem is logged and it exits 0.
#
# Settings (environment; a Prolog's environment comes from slurmd, so set them in this file if needed):
#   GPUDASH_JOB_MAPPING_DIR    the mapping directory (default /var/lib/dcgm-exporter/job-mapping, the GPU
#                              Operator's); a tmpfs such as /run/gpudash/job-mapping drops stale files at boot
#   GPUDASH_SLURM_GPU_ORDER    minor (default): Slurm index = rank of the device minor number;
#                              nvml: Slurm index = NVML index (only if you checked it on this node type)
#   GPUDASH_NVIDIA_DRIVER_DIR  default /proc/driver/nvidia/gpus
#   GPUDASH_NVIDIA_SMI         default nvidia-smi
#   GPUDASH_SCONTROL           default scontrol (asked only for what the environment lacks)
#   GPUDASH_JOB_MAPPING_SYSLOG 1 (default): log to syslog as well as stderr; 0: stderr only

PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin  # Slurm runs Prologs without a PATH
MAPPING_DIR=${GPUDASH_JOB_MAPPING_DIR:-/var/lib/dcgm-exporter/job-mapping}
DRIVER_DIR=${GPUDASH_NVIDIA_DRIVER_DIR:-/proc/driver/nvidia/gpus}
NVIDIA_SMI=${GPUDASH_NVIDIA_SMI:-nvidia-smi}
GPU_ORDER=${GPUDASH_SLURM_GPU_ORDER:-minor}
SCONTROL=${GPUDASH_SCONTROL:-scontrol}
LOCK_SECONDS=10
INFO_CHARS=128  # of one job-info value: job names are free text
TAG=gpudash-job-mapping

log() {
    local message="job ${SLURM_JOB_ID:-?}: $*"
    echo "$TAG: $message" >&2
    [[ ${GPUDASH_JOB_MAPPING_SYSLOG:-1} == 1 ]] && command -v logger >/dev/null 2>&1 \
        && logger -t "$TAG" -- "$message" 2>/dev/null
    return 0
}

# -- which GPUs --------------------------------------------------------------------------------------

declare -A INDEX_OF_UUID=() INDEX_OF_BUS=()

bus_key() {  # 00000000:18:00.0 and 0000:18:00.0 -> 0:18:00.0 (lowercase, domain without leading zeros)
    local id=${1,,} domain rest
    domain=${id%%:*}
    rest=${id#*:}
    [[ $domain =~ ^[0-9a-f]+$ && $rest =~ ^[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$ ]] || return 1
    printf '%x:%s' "$((16#$domain))" "$rest"
}

read_nvml() {  # NVML index by UUID and by PCI bus id, from one nvidia-smi call
    local out index uuid bus key
    if ! out=$("$NVIDIA_SMI" --query-gpu=index,uuid,pci.bus_id --format=csv,noheader 2>&1); then
        log "nvidia-smi failed: ${out//$'\n'/ }"
        return 1
    fi
    while IFS=', ' read -r index uuid bus; do
        [[ $index =~ ^[0-9]+$ ]] || continue
        INDEX_OF_UUID[$uuid]=$index
        key=$(bus_key "$bus") && INDEX_OF_BUS[$key]=$index
    done <<<"$out"
    ((${#INDEX_OF_UUID[@]} > 0)) || { log "nvidia-smi listed no GPU"; return 1; }
}

expand_list() {  # "0,2-4" -> "0 2 3 4"
    local part out=()
    IFS=, read -ra parts <<<"$1"
    for part in "${parts[@]}"; do
        if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
            out+=($(seq "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"))
        else
            out+=("$part")
        fi
    done
    echo "${out[*]}"
}

buses_by_minor() {  # the GPUs' PCI bus ids in increasing device-minor order (Slurm's GRES order)
    local info minor bus
    for info in "$DRIVER_DIR"/*/information; do
        [[ -r $info ]] || continue
        minor=$(sed -n 's/^Device Minor:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$info")
        bus=$(basename "$(dirname "$info")")
        [[ -n $minor ]] && echo "$minor $bus"
    done | sort -n | cut -d' ' -f2
}

nvml_indices() {  # the NVML index of each of this job's GPUs on this node, one per line
    local entry entries uuids=() slurm=() buses key
    IFS=, read -ra entries <<<"${CUDA_VISIBLE_DEVICES:-}"
    for entry in "${entries[@]}"; do
        case $entry in
            GPU-*) uuids+=("$entry") ;;
            MIG-*) log "MIG instance $entry not mapped: name its file <gpu>.<GPU_I_ID> yourself if you need it" ;;
        esac
    done
    if ((${#uuids[@]} > 0)); then
        for entry in "${uuids[@]}"; do
            if [[ -n ${INDEX_OF_UUID[$entry]:-} ]]; then
                echo "${INDEX_OF_UUID[$entry]}"
            else
                log "GPU $entry is not on this node (nvidia-smi does not list it); not mapped"
            fi
        done
        return 0
    fi
    if [[ -n ${SLURM_JOB_GPUS:-} ]]; then
        read -ra slurm <<<"$(expand_list "$SLURM_JOB_GPUS")"
    elif [[ ${CUDA_VISIBLE_DEVICES:-} =~ ^[0-9,-]+$ ]]; then  # shard/MPS: host numbering in the Prolog
        read -ra slurm <<<"$(expand_list "$CUDA_VISIBLE_DEVICES")"
    fi
    ((${#slurm[@]} > 0)) || return 0
    if [[ $GPU_ORDER == nvml ]]; then
        printf '%s\n' "${slurm[@]}"
        return 0
    fi
    mapfile -t buses < <(buses_by_minor)
    if ((${#buses[@]} == 0)); then
        log "cannot read $DRIVER_DIR to order GPUs by device minor; assuming Slurm's GPU index is NVML's"
        printf '%s\n' "${slurm[@]}"
        return 0
    fi
    for entry in "${slurm[@]}"; do
        if [[ ! $entry =~ ^[0-9]+$ ]] || ((entry >= ${#buses[@]})); then
            log "Slurm GPU index $entry: no such GPU in $DRIVER_DIR; not mapped"
            continue
        fi
        key=$(bus_key "${buses[$entry]}") || { log "odd PCI bus id ${buses[$entry]}; not mapped"; continue; }
        if [[ -n ${INDEX_OF_BUS[$key]:-} ]]; then
            echo "${INDEX_OF_BUS[$key]}"
        else
            log "GPU at ${buses[$entry]} is not listed by nvidia-smi; not mapped"
        fi
    done
}

# -- the files -----------------------------------------------------------------------------------------

write_lines() {  # write_lines FILE LINE...: atomically, through a hidden temporary name; no lines: remove
    local file=$1 dir tmp
    shift
    if (($# == 0)); then
        rm -f -- "$file"
        return
    fi
    dir=$(dirname "$file")
    tmp="$dir/.$(basename "$file").$$.tmp"
    printf '%s\n' "$@" >"$tmp" && chmod 0644 "$tmp" && mv -f -- "$tmp" "$file" || { rm -f -- "$tmp"; return 1; }
}

other_lines() {  # the lines of FILE other than JOB
    local line
    [[ -f $1 ]] || return 0
    while IFS= read -r line || [[ -n $line ]]; do
        line=${line%$'\r'}
        [[ -n $line && $line != "$2" ]] && echo "$line"
    done <"$1"
}

add_job() {  # add_job FILE JOB: the job's line once, the others kept
    local lines
    mapfile -t lines < <(other_lines "$1" "$2")
    write_lines "$1" "${lines[@]}" "$2"
}

remove_job() {  # remove_job FILE JOB: the other jobs' lines kept, the file removed when none is left
    local lines
    grep -qxF -- "$2" "$1" 2>/dev/null || grep -qxF -- "$2"$'\r' "$1" 2>/dev/null || return 0
    mapfile -t lines < <(other_lines "$1" "$2")
    write_lines "$1" "${lines[@]}"
}

locked() {  # run "$@" holding the directory's lock (waits up to LOCK_SECONDS, then goes on without it)
    local fd
    if { exec {fd}>>"$MAPPING_DIR/.lock"; } 2>/dev/null; then
        flock -w "$LOCK_SECONDS" "$fd" 2>/dev/null || log "could not take $MAPPING_DIR/.lock; writing anyway"
        "$@"
        local rc=$?
        exec {fd}>&-
        return $rc
    fi
    log "cannot open $MAPPING_DIR/.lock; writing without the lock"
    "$@"
}

# -- who holds the job --------------------------------------------------------------------------------

info_value() {  # one line of printable text, at most INFO_CHARS characters
    local value=${1//[[:cntrl:]]/ }
    printf '%s' "${value:0:INFO_CHARS}"
}

scontrol_field() {  # scontrol_field TEXT NAME: NAME=value from `scontrol show job -o` (JobName may hold spaces)
    local text=$1 name=$2 pattern
    case $name in
        JobName) pattern='(^|[[:space:]])JobName=(.*)[[:space:]]UserId=' ;;
        UserId) pattern='(^|[[:space:]])UserId=([^([:space:]]*)' ;;  # alice(1000): the name only
        *) pattern="(^|[[:space:]])$name=([^[:space:]]*)" ;;
    esac
    [[ $text =~ $pattern ]] && printf '%s' "${BASH_REMATCH[2]}"
    return 0
}

write_job_info() {  # .jobinfo/<job>: user, account, partition, job_name (never fails the job)
    local job=$1 user=${SLURM_JOB_USER:-} account=${SLURM_JOB_ACCOUNT:-} partition=${SLURM_JOB_PARTITION:-}
    local name=${SLURM_JOB_NAME:-} shown
    if [[ -z $user || -z $account || -z $partition || -z $name ]]; then
        if shown=$("$SCONTROL" show job -o "$job" 2>&1); then
            [[ -n $user ]] || user=$(scontrol_field "$shown" UserId)
            [[ -n $account ]] || account=$(scontrol_field "$shown" Account)
            [[ -n $partition ]] || partition=$(scontrol_field "$shown" Partition)
            [[ -n $name ]] || name=$(scontrol_field "$shown" JobName)
        else
            log "scontrol show job failed: ${shown//$'\n'/ }; job info from the environment only"
        fi
    fi
    mkdir -p -m 0755 -- "$MAPPING_DIR/.jobinfo" && write_lines "$MAPPING_DIR/.jobinfo/$job" \
        "user=$(info_value "$user")" "account=$(info_value "$account")" \
        "partition=$(info_value "$partition")" "job_name=$(info_value "$name")" \
        || log "cannot write $MAPPING_DIR/.jobinfo/$job"
}

prolog() {
    local job=$1 index indices=()
    if [[ -n ${SLURM_JOB_SLUID:-} ]]; then
        if [[ $SLURM_JOB_SLUID =~ ^[A-Za-z0-9]{1,64}$ ]]; then
            mkdir -p -m 0755 -- "$MAPPING_DIR/.sluid" && write_lines "$MAPPING_DIR/.sluid/$SLURM_JOB_SLUID" "$job" \
                || log "cannot record SLUID $SLURM_JOB_SLUID"
        else
            log "odd SLURM_JOB_SLUID '$SLURM_JOB_SLUID'; not recorded"
        fi
    fi
    [[ -n ${SLURM_JOB_GPUS:-}${CUDA_VISIBLE_DEVICES:-} ]] || return 0  # a job without GPUs on this node
    read_nvml || return 0
    mapfile -t indices < <(nvml_indices | sort -un)
    ((${#indices[@]} > 0)) || { log "no GPU to map"; return 0; }
    write_job_info "$job"
    for index in "${indices[@]}"; do
        add_job "$MAPPING_DIR/$index" "$job" || log "cannot write $MAPPING_DIR/$index"
    done
}

epilog() {  # every file that names the job, whatever the environment says: nothing is left behind
    local job=$1 file
    for file in "$MAPPING_DIR"/[0-9]*; do
        [[ -f $file && $(basename "$file") =~ ^[0-9]+(\.[0-9]+)?$ ]] || continue
        remove_job "$file" "$job" || log "cannot update $file"
    done
    for file in "$MAPPING_DIR"/.sluid/*; do
        [[ -f $file ]] || continue
        remove_job "$file" "$job" || log "cannot remove $file"
    done
    rm -f -- "$MAPPING_DIR/.jobinfo/$job" || log "cannot remove $MAPPING_DIR/.jobinfo/$job"
}

main() {
    local mode=${1:-} job=${SLURM_JOB_ID:-}
    if [[ -z $mode ]]; then
        case ${SLURM_SCRIPT_CONTEXT:-}:$0 in
            prolog_slurmd:*) mode=add ;;
            epilog_slurmd:*) mode=remove ;;
            *epilog*) mode=remove ;;
            *prolog*) mode=add ;;
        esac
    fi
    if [[ ! $job =~ ^[0-9A-Za-z_.+-]{1,64}$ ]]; then
        log "no usable SLURM_JOB_ID; nothing done"
        return 0
    fi
    case $mode in
        add)
            [[ -n ${SLURM_JOB_GPUS:-}${CUDA_VISIBLE_DEVICES:-}${SLURM_JOB_SLUID:-} ]] || return 0  # no GPU here
            mkdir -p -m 0755 -- "$MAPPING_DIR" || { log "cannot create $MAPPING_DIR"; return 0; }
            locked prolog "$job"
            ;;
        remove)
            [[ -d $MAPPING_DIR ]] || return 0
            locked epilog "$job"
            ;;
        *) log "run as a Prolog or an Epilog, or with 'add' or 'remove'; nothing done" ;;
    esac
}

main "$@"
exit 0
