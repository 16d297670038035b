"""`gpudash demo`: the whole path on one machine, from GPUs to dashboards, checked.

Starts the exporter (this machine's GPUs when NVML finds any, else a simulated 8-GPU node with a few
injected faults), Prometheus with the generated rules and scrape config, Alertmanager with the generated
routes delivering to a local webhook receiver, and node_exporter beside real GPUs, all on 127.0.0.1 on
free ports and in temporary directories. A simulated node also gets its past (gpudash.stack.demo_node): its jobs
have trained for 50 minutes, two of its faults have been firing for minutes, and yesterday is there for the
"now against yesterday" panels. Then it waits for data (and, on a simulated node, for its live fault's page),
runs `gpudash check` on every dashboard and rule, prints a short fleet summary, the pages delivered and how each
injected fault shows, draws each dashboard as a PNG (gpudash preview,
when matplotlib is installed), pushes the dashboards when GRAFANA_URL is set, and ends with `gpudash doctor`
on its own servers. Ctrl-C (or SIGTERM) stops everything it started and
removes its data; `--once` does it all once and exits 0 when every query passed, 1 when one failed.
"""

from __future__ import annotations

import os
import re
import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

import click

from gpudash.catalog import EXPORTER_PENDING, SIGNALS
from gpudash.check.judge import GroupResult, Status, failures, run_check
from gpudash.check.queries import dashboard_groups, load_dashboards, rule_groups
from gpudash.check.tables import summary
from gpudash.config.durations import grafana_ms, parse_duration
from gpudash.config.loading import Settings, load_settings
from gpudash.config.options import config_options
from gpudash.config.site import Site
from gpudash.errors import CheckFailed, GpudashError, OutputError, RemoteError
from gpudash.escape import promql_matcher
from gpudash.promql.for_settings import promql_for, recording_rules
from gpudash.promql.recordings import JOB_RECORDINGS, RECORDING_BY_NAME
from gpudash.promql.scanner import metric_names, subquery_steps
from gpudash.repository import ALERTMANAGER_FILE, DASHBOARDS_JSON_DIR, RECORDING_FILE
from gpudash.stack.demo_node import (
    GPUS,
    INJECTED,
    LEAD,
    LEAD_S,
    LIVE_PAGE,
    exporter_args,
    prometheus_with_past,
    story,
)
from gpudash.stack.demo_report import (
    alert_line,
    fleet_summary,
    is_page,
    notification_line,
    pages_and_faults,
    render_brief,
)
from gpudash.stack.process import AlertmanagerProcess, PrometheusProcess, free_port
from gpudash.stack.servers import (
    ExporterProcess,
    NodeExporter,
    WebhookReceiver,
    local_site,
    prometheus_config,
    rendered,
    rule_files,
    scrape_jobs,
)

CLUSTER = "demo"
INTERVAL = "2s"  # scrape and rule evaluation: data within seconds, not the production 15 s
INTERVAL_S = parse_duration(INTERVAL).seconds
SUMMARY_EVERY_S = 30.0
PREVIEWS_DIR = Path(".demo/previews")  # in the repository, ignored by git: still there after the demo stops
PREVIEW_RANGE_S = 15 * 60
DATA_TIMEOUT_S = 90.0
# Series rate() and increase() read: the counters, and the running totals dcgm-exporter types gauge (NVLink bandwidth)
COUNTERS = tuple(s.dcgm_name for s in SIGNALS if s.type == "counter" or s.dcgm_name.endswith("_TOTAL"))


class Stopped(Exception):
    """Ctrl-C or SIGTERM arrived: unwind and stop everything the demo started."""


def nvml_gpu_count() -> int:
    """GPUs NVML can see on this machine; 0 without a driver or GPUs."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver, no permission: all mean "simulate"
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        with suppress(Exception):
            pynvml.nvmlShutdown()


@dataclass
class DemoStack:
    settings: Settings
    exporter: ExporterProcess
    prometheus: PrometheusProcess
    alertmanager: AlertmanagerProcess
    receiver: WebhookReceiver
    rules_dir: Path
    simulated: bool
    node_exporter: NodeExporter | None = None
    started: float = 0.0  # time.monotonic() just before Prometheus was started


def _node_exporter(stack: ExitStack) -> NodeExporter | None:
    try:
        return stack.enter_context(NodeExporter())
    except GpudashError as exc:  # not installed: the data-loader alert then has no CPU side to read
        click.echo(f"  node_exporter: not started ({exc.format_message()})")
        return None


def start(stack: ExitStack, settings: Settings, simulate: bool, echo: Any = click.echo) -> DemoStack:
    """Start every server of the demo inside `stack`; they stop when it closes.

    The exporter comes last, on an address chosen first: Prometheus is already scraping when the simulated
    node's live fault happens, as it would be on a real node.
    """
    receiver = stack.enter_context(WebhookReceiver(lambda body: echo(notification_line(body))))
    address = f"127.0.0.1:{free_port()}"
    # node_exporter describes this machine's CPUs: right beside real GPUs, misleading beside simulated ones.
    node = None if simulate else _node_exporter(stack)
    site = local_site(settings.site, CLUSTER, [address], interval=INTERVAL, webhook=receiver.url)
    local = replace(settings, site=site)
    files = rendered(local)
    rules_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpudash-demo-rules-")))
    for rel, text in files.items():
        (rules_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (rules_dir / rel).write_text(text, encoding="utf-8")
    alertmanager = stack.enter_context(AlertmanagerProcess(files[ALERTMANAGER_FILE]))
    jobs = scrape_jobs(files)
    if node is not None:
        jobs.append({"job_name": site.node_job, "scrape_interval": INTERVAL,
                     "static_configs": [{"targets": [node.address], "labels": {"cluster": CLUSTER}}]})
    config = prometheus_config(jobs, rule_files=list(rule_files(files)), interval=INTERVAL,
                               alertmanager=alertmanager.address)
    started = time.monotonic()
    if simulate:
        now = time.time()  # the written past ends here; the exporter's clock carries on from it
        prometheus = stack.enter_context(_with_past(config, files, local, now, address, site.scrape_job, echo))
        args = exporter_args(now - LEAD_S)
    else:
        prometheus = stack.enter_context(PrometheusProcess(config, rule_files(files)))
        args = []
    exporter = stack.enter_context(ExporterProcess(args, port=int(address.rsplit(":", 1)[1])))
    echo(f"  exporter:      {exporter.url} ({f'{GPUS} simulated H200s' if simulate else 'this machine, NVML'})")
    echo(f"  prometheus:    {prometheus.url} (rules and scrape config from `gpudash rules`, every {INTERVAL})")
    echo(f"  alertmanager:  {alertmanager.url} -> webhook {receiver.url}")
    if node is not None:
        echo(f"  node_exporter: {node.url}/metrics (this machine's CPU load, for GPUDataLoaderBottleneck)")
    return DemoStack(local, exporter, prometheus, alertmanager, receiver, rules_dir, simulate, node, started)


@contextmanager
def _with_past(config: str, files: dict[str, str], settings: Settings, now: float, address: str, job: str,
               echo: Any) -> Iterator[PrometheusProcess]:
    """Prometheus on the simulated node's past (gpudash.stack.demo_node), up to `now` (Unix time)."""
    began = time.monotonic()
    target = {"job": job, "instance": address, "cluster": CLUSTER, "rack": "rack-1"}
    with prometheus_with_past(config, files, settings, now, target, INTERVAL) as prometheus:
        echo(f"  history:       the node's last {LEAD} (its jobs, its faults, the alerts' state) and the same "
             f"time yesterday, written as blocks ({time.monotonic() - began:.1f} s)")
        yield prometheus


def wait_for_data(demo: DemoStack, timeout: float = DATA_TIMEOUT_S, echo: Any = click.echo) -> float:
    """Wait on what the check needs, not on a clock; return the seconds it took.

    In order: the exporter scraped; every field it reads has a value in Prometheus (rates such as PCIe
    throughput and GPM tensor activity need two reads of the exporter's slow loop, 10 s apart by default);
    on a simulated node, its live fault firing; two samples of every counter the exporter publishes; every
    recording rule whose inputs exist evaluated (except the hourly ones); on a simulated node, the live fault's
    page delivered.
    A condition that does not hold by `timeout` is said and left to the check to name, so the demo never
    hangs and never hides which queries have no data.
    """
    started = time.monotonic()
    prometheus = demo.prometheus
    job = demo.settings.site.scrape_job

    def left() -> float:
        return max(1.0, timeout - (time.monotonic() - started))

    scraped = "{" + promql_matcher("job", "=", job) + "}"
    try:
        prometheus.wait_for(RECORDING_BY_NAME["cluster:gpu_count:count"].record, timeout=left())
        prometheus.wait_for(f"{EXPORTER_PENDING}{scraped} == 0", timeout=left())
        if demo.simulated:  # and the live injected fault, which pages at once
            prometheus.wait_for(f'ALERTS{{alertname="{LIVE_PAGE}",alertstate="firing"}}', timeout=left())
        for counter in COUNTERS:  # rate() and increase() need two samples of a counter
            if prometheus.query(f"{counter}{scraped}"):
                prometheus.wait_for(f"count_over_time({counter}{scraped}[5m]) > 1", timeout=left())
        for rule, expr in recording_rules(demo.settings):
            # its inputs exist: its first evaluation is due within one interval (an hourly one's may be an hour away)
            if not rule.hourly and prometheus.query(expr):
                prometheus.wait_for(rule.record, timeout=left())
        # The energy panels (fleet, job) sum a recording over a subquery at the site's scrape interval: it answers
        # once the recording has spanned two of its steps (the committed dashboards' step: the default site's
        # scrape interval, not the demo's faster one). A node without a simulated past starts with none.
        span = 2 * Site().scrape_interval.seconds
        for record in dict.fromkeys([*(rec.record for rec in JOB_RECORDINGS), *subqueried_recordings()]):
            if prometheus.query(record):
                prometheus.wait_for(f"min(count_over_time({record}[10m])) * {INTERVAL_S:g} > {span:g}",
                                    timeout=left())
        if demo.simulated and demo.receiver.wait_for(lambda body: is_page(body, LIVE_PAGE), left()) is None:
            echo(f"  still waiting after {time.monotonic() - started:.0f} s for the {LIVE_PAGE} page; checking anyway")
    except RemoteError as exc:
        echo(f"  still waiting after {time.monotonic() - started:.0f} s ({exc.format_message()}); checking anyway")
    return time.monotonic() - started



def subqueried_recordings() -> list[str]:
    """The recorded series the committed dashboards read through a subquery, which samples at its own step."""
    groups = dashboard_groups(load_dashboards([DASHBOARDS_JSON_DIR]), INTERVAL_S)
    found = [name for g in groups for q in g.queries if subquery_steps(q.expr)
             for name in metric_names(q.expr) if name in RECORDING_BY_NAME]
    return list(dict.fromkeys(found))


def not_yet(results: Sequence[GroupResult], age_s: float) -> str:
    """What a freshly started Prometheus cannot answer yet, as one paragraph ('' when nothing)."""
    young = [r for group in results for r in group.results if r.status is Status.NEEDS_HISTORY]
    if not young:
        return ""
    listed = [part.strip() for r in young for found in _OFFSETS.findall(r.detail) for part in found.split(",")]
    offsets = sorted(set(listed), key=_seconds)
    reach = f" (offsets up to {offsets[-1]})" if offsets else ""
    return (f"not on this node yet: {len(young)} queries look further back than the {age_s:.0f} s of history "
            f"Prometheus holds{reach}: the now-against-yesterday row fills in after a day, the alert windows "
            "within their lengths. `gpudash demo --simulate` backfills yesterday to show them at once.")


_OFFSETS = re.compile(r"without offset ([^;]+);")


def _seconds(offset: str) -> float:
    """An offset's length, for ordering: Prometheus' d/h/m/s, or Grafana's units (1w) when it is not one."""
    try:
        return parse_duration(offset).seconds
    except ValueError:
        return (grafana_ms(offset) or 0) / 1000


def check_demo(demo: DemoStack) -> list[GroupResult]:
    settings = demo.settings
    groups = dashboard_groups(load_dashboards([DASHBOARDS_JSON_DIR]), INTERVAL_S)
    groups += rule_groups([demo.rules_dir / Path(RECORDING_FILE).parent])
    return run_check(demo.prometheus.url, groups, promql_for(settings, rule_interval=parse_duration(INTERVAL)))


def push_or_explain(prometheus_url: str, env: dict[str, str], settings: Settings) -> None:
    """Push the dashboards (and a data source for this Prometheus) when GRAFANA_URL is set; else say how."""
    if not env.get("GRAFANA_URL"):
        click.echo("Grafana: not pushed (GRAFANA_URL is not set). To push the dashboards with a data source for "
                   "this Prometheus:\n  GRAFANA_URL=http://localhost:3000 GRAFANA_TOKEN=<service-account token> "
                   "make demo\nor, against any Grafana and Prometheus: "
                   "gpudash provision --prometheus-url http://PROMETHEUS:9090")
        return
    from gpudash.sync.grafana_api import connection_from
    from gpudash.sync.provision import datasource_spec, provision_grafana

    click.echo(f"Grafana: provisioning {env['GRAFANA_URL']} (data source -> {prometheus_url}, then every dashboard)")
    spec = datasource_spec(settings.site, prometheus_url)
    provision_grafana(connection_from(env), settings, spec, DASHBOARDS_JSON_DIR, dry_run=False, verbose=0,
                      echo=click.echo)


def preview_demo(prometheus_url: str, out: Path = PREVIEWS_DIR, echo: Any = click.echo) -> list[Path]:
    """Draw every dashboard from the demo's Prometheus and print the paths; without matplotlib, say so and go on."""
    from gpudash.preview.previewer import Dashboards, MissingExtra, draw_previews

    dashboards = Dashboards.of([d for d, _ in load_dashboards([DASHBOARDS_JSON_DIR])])
    try:
        paths = draw_previews(prometheus_url, out, dashboards, (), PREVIEW_RANGE_S, int(INTERVAL_S))
    except (MissingExtra, OutputError) as exc:  # no matplotlib, or someone else's PNG where ours would go
        echo(f"previews: not drawn ({exc.format_message()})")
        return []
    echo("previews (each dashboard drawn from this Prometheus, no Grafana needed):")
    for path in paths:
        echo(f"  {path}")
    return paths


def doctor_demo(demo: DemoStack, env: dict[str, str]) -> None:
    """`gpudash doctor` on the demo's own servers (and Grafana when GRAFANA_URL is set): one line per link."""
    from gpudash.doctor.cli import expectations, given_from, print_findings
    from gpudash.doctor.diagnose import diagnose

    click.echo("\ndoctor (the chain, link by link):")
    given = given_from((demo.exporter.url,), demo.prometheus.url, demo.alertmanager.url, env.get("GRAFANA_URL"),
                       demo.settings, False, env)
    print_findings(diagnose(given, expectations(demo.settings)), "text")


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    # Also for SIGINT: a shell starts background jobs with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt; the demo must stop on Ctrl-C however it was started. Once: a second Ctrl-C must
    # not cut the cleanup short and leave servers behind.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _while_stopping)
    raise Stopped()


def _while_stopping(signum: int, frame: FrameType | None) -> None:
    click.echo("stopping; a moment while every process exits", err=True)


@click.command("demo")
@click.option("--once", is_flag=True, help="Run the whole path once and exit: 0 when every query passed, else 1.")
@click.option("--simulate/--nvml", "simulate", default=None,
              help="Force a simulated node, or this machine's GPUs (default: NVML when it finds GPUs).")
@click.option("--verbose", "-v", is_flag=True, help="Print every query's row, not only those that are not ok.")
@click.option("--previews", type=click.Path(path_type=Path), default=PREVIEWS_DIR, show_default=True,
              help="Where to write a PNG of each dashboard (needs matplotlib: pip install 'gpudash[preview]').")
@config_options()
def demo(once: bool, simulate: bool | None, verbose: bool, previews: Path, thresholds: Path | None,
         site: Path | None) -> None:
    """Run exporter, Prometheus and Alertmanager locally, check every query, summarise the fleet.

    \b
    Examples:
      gpudash demo                  # until Ctrl-C; prints the fleet summary every 30 s
      gpudash demo --once           # CI: the same path once, exit 0 or 1
      GRAFANA_URL=http://localhost:3000 GRAFANA_TOKEN=... gpudash demo   # also push the dashboards
    """
    settings = load_settings(thresholds, site)
    load_dashboards([DASHBOARDS_JSON_DIR])  # fail before starting anything when run outside the repository
    if simulate is None:
        found = nvml_gpu_count()
        simulate = found == 0
        click.echo(f"NVML: {found} GPUs, reading them" if found else "NVML: no GPUs here, simulating a node")
    previous = {sig: signal.signal(sig, _on_stop_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ExitStack() as stack:
            click.echo("starting (127.0.0.1, free ports, temporary data):")
            demo_stack = start(stack, settings, simulate)
            if simulate:
                click.echo(f"  injected:\n{story()}")
            click.echo(f"waiting for data: {wait_for_data(demo_stack):.1f} s")
            results = check_demo(demo_stack)
            click.echo(render_brief(results, verbose))
            click.echo(summary(results, demo_stack.prometheus.url))
            if not simulate:
                click.echo(not_yet(results, time.monotonic() - demo_stack.started) or "history: every query answered")
            click.echo("")
            click.echo(fleet_summary(demo_stack.prometheus, demo_stack.settings, demo_stack.receiver))
            click.echo(pages_and_faults(demo_stack.prometheus, demo_stack.settings, demo_stack.receiver.received(),
                                        INJECTED if simulate else ()))
            preview_demo(demo_stack.prometheus.url, previews)
            push_or_explain(demo_stack.prometheus.url, dict(os.environ), settings)
            doctor_demo(demo_stack, dict(os.environ))
            failed = failures(results)
            if once:
                if failed:
                    raise CheckFailed(f"{len(failed)} queries failed (see the table above)")
                return
            click.echo(f"\nrunning; Prometheus {demo_stack.prometheus.url}, Alertmanager "
                       f"{demo_stack.alertmanager.url}. Ctrl-C stops everything and removes its data.")
            _follow(demo_stack)
    except (KeyboardInterrupt, Stopped):
        click.echo("\nstopped; every process the demo started is gone and its data removed")
        if once:
            raise click.exceptions.Exit(130) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _follow(demo: DemoStack) -> None:
    seen: set[str] = set()
    while True:
        time.sleep(SUMMARY_EVERY_S)
        click.echo(fleet_summary(demo.prometheus, demo.settings, demo.receiver, one_line=True))
        for line in alert_line(demo.prometheus, seen):
            click.echo(line)
