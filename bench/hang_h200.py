"""A hung collective's signature on one real GPU, watched end to end: GPUJobHung fires on it and resolves after.

    sudo python3 bench/hang_h200.py [--gpu 0] [--spin 300]     # from the repository root, on a GPU node

A collective that never completes leaves every GPU of the job spinning: utilization near 100 % with no tensor or
DRAM work and low power. One GPU reproduces that with a spin kernel (PyTorch's torch.cuda._sleep busy-waits on the
SM clock). This script attributes the GPU to a job with a Slurm job-mapping file, runs the bundled exporter on NVML,
a real Prometheus with the generated rules (the hang's window, for: and keep_firing_for cut to 1 minute, and a 5 s
rule and scrape interval, so that the run takes minutes instead of half an hour), starts the spin, reports when
GPUJobHung goes pending and firing and what the GPU read then, stops the spin and reports when the alert ends.
Exit 0 when GPUJobHung fired naming the job and then resolved; 1 otherwise.

--simulate N runs the same path on a simulated node whose GPU --gpu spins as a hung job's would (no GPU needed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
JOB = "777"
EXPORTER = "127.0.0.1:9400"  # the default site's demo target
SPIN = ("import sys, time, torch\ntorch.cuda.set_device(int(sys.argv[1]))\nend = time.time() + float(sys.argv[2])\n"
        "while time.time() < end:\n    torch.cuda._sleep(200_000_000)\n    torch.cuda.synchronize()\n")
SIGNATURE = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
             "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE")


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def query(url: str, expr: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=10) as r:
        return list(json.loads(r.read())["data"]["result"])


def settings(work: Path) -> tuple[Path, Path]:
    """thresholds.yaml with the hang judged over 1 minute, and a site scraping and evaluating every 5 s."""
    thresholds = yaml.safe_load((ROOT / "thresholds.yaml").read_text())
    hung = thresholds["alerts"]["job_hung"]
    hung.update({"window": "1m", "for": "1m", "keep_firing_for": "1m"})
    (work / "thresholds.yaml").write_text(yaml.safe_dump(thresholds))
    (work / "site.yaml").write_text(yaml.safe_dump({"scrape": {"interval": "5s", "timeout": "5s"}}))
    return work / "thresholds.yaml", work / "site.yaml"


def prometheus_config(work: Path, generated: Path) -> Path:
    config = yaml.safe_load((generated / "prometheus" / "scrape-gpu.yml").read_text())
    config["global"] = {"scrape_interval": "5s", "evaluation_interval": "5s"}
    config["rule_files"] = sorted(str(p) for p in (generated / "prometheus").glob("*.rules.yml"))
    config.pop("alerting", None)  # no Alertmanager here: ALERTS is what this run reads
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def wait_for(what: str, test, timeout: float, every: float = 5.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = test()
        if got:
            return got
        time.sleep(every)
    say(f"gave up waiting for {what} after {timeout:.0f} s")
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--spin", type=float, default=300.0, help="longest the spin runs (s)")
    parser.add_argument("--simulate", type=int, metavar="N", help="a simulated node, GPU --gpu spinning")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gpudash-hang-"))
    procs: list[subprocess.Popen[bytes]] = []
    logs = contextlib.ExitStack()
    exporter_log = logs.enter_context((work / "exporter.log").open("wb"))
    prometheus_log = logs.enter_context((work / "prometheus.log").open("wb"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    try:
        thresholds, site = settings(work)
        generated = work / "generated"
        subprocess.run([sys.executable, "-m", "gpudash", "rules", "--thresholds", str(thresholds), "--site", str(site),
                        "--out", str(generated)], check=True, env=env, cwd=work, stdout=subprocess.DEVNULL)
        (work / "jobs").mkdir()
        (work / "jobs" / str(args.gpu)).write_text(JOB + "\n")
        source = (["--simulate", str(args.simulate), "--workload", f"{args.gpu}=train", "--fault", f"{args.gpu}=hang"]
                  if args.simulate else [])
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gpudash", "exporter", "--listen", EXPORTER, "--slow-interval", "2s",
             "--hpc-job-mapping-dir", str(work / "jobs"), *source],
            env=env, stdout=exporter_log, stderr=subprocess.STDOUT))
        port = 9090 + os.getpid() % 1000
        procs.append(subprocess.Popen(
            ["prometheus", f"--config.file={prometheus_config(work, generated)}",
             f"--storage.tsdb.path={work / 'data'}", f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=prometheus_log, stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}"
        if not wait_for("the exporter's series in Prometheus",
                        lambda: _safe(lambda: query(url, f'DCGM_FI_DEV_GPU_UTIL{{hpc_job="{JOB}"}}')), 60, 2):
            print((work / "exporter.log").read_text()[-2000:], (work / "prometheus.log").read_text()[-2000:])
            return 1
        say(f"GPU {args.gpu} attributed to job {JOB}, scraped every 5 s; the hang judged over 1m, for 1m")
        spin = None
        if not args.simulate:
            spin = subprocess.Popen([sys.executable, "-c", SPIN, str(args.gpu), str(args.spin)])
            procs.append(spin)
        began = time.monotonic()
        say("spin kernel started" if spin else "simulated spin from the start")
        states: dict[str, float] = {}

        def hung_state() -> str | None:
            rows = _safe(lambda: query(url, 'ALERTS{alertname="GPUJobHung"}')) or []
            for row in rows:
                state = row["metric"]["alertstate"]
                if state not in states:
                    states[state] = time.monotonic() - began
                    say(f"GPUJobHung {state} after {states[state]:.0f} s: {json.dumps(row['metric'], sort_keys=True)}")
            return "firing" if "firing" in states else None

        fired = wait_for("GPUJobHung firing", hung_state, args.spin - 10)
        for name in SIGNATURE:
            rows = _safe(lambda n=name: query(url, f"max_over_time({n}[1m])")) or []  # type: ignore[misc]
            say(f"  {name} (max over the last 1m): {', '.join(r['value'][1] for r in rows) or 'absent'}")
        if spin is not None:
            spin.send_signal(signal.SIGTERM)
            spin.wait(timeout=30)
        stopped = time.monotonic()
        say("spin stopped" if spin else "simulated spin goes on (no end to wait for)")
        resolved = None
        if spin is not None and fired:
            resolved = wait_for("GPUJobHung to end", lambda: not _safe(
                lambda: query(url, 'ALERTS{alertname="GPUJobHung"}')), 240)
            if resolved:
                say(f"GPUJobHung ended {time.monotonic() - stopped:.0f} s after the spin stopped")
        others = _safe(lambda: query(url, 'ALERTS{alertname!="GPUJobHung"}')) or []
        say("other alerts now: " + (", ".join(sorted({r["metric"]["alertname"] for r in others})) or "none"))
        ok = bool(fired) and (args.simulate is not None or bool(resolved))
        say("RESULT: " + ("PASS" if ok else "FAIL"))
        return 0 if ok else 1
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        logs.close()
        shutil.rmtree(work, ignore_errors=True)


def _safe(call):  # type: ignore[no-untyped-def]
    try:
        return call()
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
