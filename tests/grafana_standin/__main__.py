"""Run the stand-in by hand: `PYTHONPATH=tests python -m grafana_standin --grafana-version 10.4.3`.

Prints one line, `Grafana <version> stand-in at <url>`, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import time

from .server import StandIn


def main() -> None:
    parser = argparse.ArgumentParser(description="Grafana HTTP API stand-in (test support, not a product).")
    parser.add_argument("--grafana-version", default="11.6.0", help="behave as this Grafana version")
    parser.add_argument("--token", default="glsa_standin_0123456789abcdef_0a1b2c3d")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay every API answer this long")
    args = parser.parse_args()
    with StandIn(args.grafana_version, token=args.token) as standin:
        if args.latency_ms:
            for method in ("GET", "POST", "PUT", "DELETE"):
                standin.fault(method, "/api", delay=args.latency_ms / 1000, times=-1)
        print(f"Grafana {args.grafana_version} stand-in at {standin.url}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
