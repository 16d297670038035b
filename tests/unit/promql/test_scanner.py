"""Reading PromQL: the selectors, filters, offsets and range windows of an expression."""

from __future__ import annotations

from gpudash.promql.scanner import filters, metric_names, offsets, selectors, widened, windows, without_offsets


def test_selectors_skip_functions_aggregations_and_label_lists() -> None:
    expr = ('bottomk(10, DCGM_FI_DEV_SM_CLOCK{cluster=~".*"} / on(cluster, instance, gpu) group_left() '
            'max by (cluster, instance, gpu) (DCGM_FI_DEV_MAX_SM_CLOCK{cluster=~".*"}))')
    assert [str(s) for s in selectors(expr)] == ['DCGM_FI_DEV_SM_CLOCK{cluster=~".*"}',
                                                  'DCGM_FI_DEV_MAX_SM_CLOCK{cluster=~".*"}']
    assert [s.name for s in selectors('count_values by (cluster) ("band", clamp_max(floor(X / 10) * 10, 90))')] == ["X"]
    assert [s.name for s in selectors("sum(rate(x[5m])) by (job)")] == ["x"]
    assert [str(s) for s in selectors('{__name__=~"DCGM_.*"} > 0')] == ['{__name__=~"DCGM_.*"}']
    # strings and braces with odd characters do not confuse it
    assert [s.name for s in selectors('label_replace(up{a="}{"}, "b", "$1", "c", "(.+)")')] == ["up"]


def test_filters_offsets_and_windows() -> None:
    assert filters("topk(10, changes(x[6h]) > 0)")
    assert not filters("sum by (cluster) (x < bool 20)")
    assert not filters('x{a=~"b|c",d!="e"}')
    assert offsets("sum(x offset 1d) - sum(y offset 1d)") == ["1d", "1d"]
    assert without_offsets("sum(x offset 1d) / y") == "sum(x) / y"
    assert windows("increase(x[31s]) + rate(y[5m])") == ["[31s]", "[5m]"]
    assert widened("increase(x[31s])", 3600) == "increase(x[3600s])"


def test_metric_names_are_the_named_selectors_once_each() -> None:
    expr = 'x{a="1"} / on(gpu) group_left() y + x{a="2"} offset 1d + {__name__="z"} + rate(w[5m]) * 100'
    assert metric_names(expr) == ["x", "y", "w"]
