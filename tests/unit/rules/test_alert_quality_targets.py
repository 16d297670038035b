"""The alert-quality report's judgement of where an alert fired (bench/alert_quality.py): keyed by node and GPU,
so in a two-node scenario an alert on the other node's GPU of the same index is off target."""

from __future__ import annotations

from bench import alert_corpus as corpus
from bench import alert_quality as quality
from bench.corpus_scenario import HOST


def _samples(alertname: str, instance: str, gpu: str, first: float) -> list[dict[str, str]]:
    labels = {"alertname": alertname, "severity": "warning", "instance": instance, "gpu": gpu}
    return [{**labels, "q": "first", "value": str(first)}, {**labels, "q": "samples", "value": "40"},
            {**labels, "q": "episodes", "value": "1"}, {**labels, "q": "after", "value": str(first)}]


def test_an_alert_on_the_peer_nodes_gpu_of_the_faulted_index_is_off_target() -> None:
    scenario = corpus.BY_NAME["ib-congested-straggler"]
    (peer,) = scenario.peers
    assert scenario.targets == (5,)
    window = scenario.fault_window
    assert window is not None
    at = window[0] + 600
    fired = quality.collect([*_samples("GPUFabricStragglerCongestion", f"{HOST}:9400", "5", at),
                             *_samples("GPUJobStraggler", f"{peer}:9400", "5", at),
                             *_samples("GPUFabricPortDegraded", f"{peer}:9100", "", at)])
    outcome = quality.Outcome(scenario, "gpudash", fired)
    # the peer's GPU 5, and a port alert of the peer's node, are not where the fault is
    assert sorted(f.alertname for f in outcome.false_alerts()) == ["GPUFabricPortDegraded", "GPUJobStraggler"]
    assert [f.alertname for f in outcome.catches()] == ["GPUFabricStragglerCongestion"]
    assert [(f.alertname, f.host, f.gpu) for f in fired] == [("GPUFabricPortDegraded", peer, ""),
                                                             ("GPUFabricStragglerCongestion", HOST, "5"),
                                                             ("GPUJobStraggler", peer, "5")]
    assert quality._cell(outcome, 66) == ["GPUFabricPortDegraded/warn gpu-node-02:node @1h20m00s",
                                          "GPUFabricStragglerCongestion/warn gpu5 @1h20m00s",
                                          "GPUJobStraggler/warn gpu-node-02:gpu5 @1h20m00s"]


def test_a_node_alert_on_the_faulted_node_and_a_jobs_alert_are_on_target() -> None:
    scenario = corpus.BY_NAME["ib-half-speed"]
    window = scenario.fault_window
    assert window is not None
    fired = quality.collect([*_samples("GPUFabricPortDegraded", f"{HOST}:9100", "", window[0] + 600),
                             *_samples("GPUAllocatedIdle", "", "", window[0] + 600)])
    outcome = quality.Outcome(scenario, "gpudash", fired)
    assert not outcome.false_alerts()
    assert {f.alertname for f in outcome.fired if outcome.on_target(f)} == {"GPUFabricPortDegraded",
                                                                            "GPUAllocatedIdle"}
