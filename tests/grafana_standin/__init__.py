"""A stand-in for Grafana's HTTP API, for tests only: not part of gpudash.

CI cannot run Grafana (it is not packaged for Debian, PyPI or npm), so the sync tests run against this
server instead. It answers the calls a dashboard-sync tool makes as shared/reference/grafana-api-contract.md
says real Grafana 9, 10, 11 and 12 do, and (13.x) as shared/reference/grafana-13-apis.md says for the /apis
dashboard and folder resources (apis.py) and for what Grafana changes on load and save (migrate.py),
status codes and message bodies included, with one switch per version difference (flavor.py). Standard
library only.
"""

from .flavor import TESTED_VERSIONS, Flavor
from .server import UI_MODEL_KEYS, Fault, Logged, StandIn

__all__ = ["TESTED_VERSIONS", "UI_MODEL_KEYS", "Fault", "Flavor", "Logged", "StandIn"]
