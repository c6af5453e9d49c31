package metric

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestEachConstructorRegistersItsMetricWithNameHelpAndLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	f := promauto.With(reg)
	Counter(f, "test_events_total", "Events.").Add(2)
	Gauge(f, "test_level", "Level.").Set(3)
	CounterVec(f, "test_calls_total", "Calls, by code.", "code").WithLabelValues("ok").Inc()
	GaugeVec(f, "test_sizes_bytes", "Sizes, by kind and part.", "kind", "part").WithLabelValues("a", "b").Set(4)
	Histogram(f, "test_wait_seconds", "Waits.", []float64{1}).Observe(0.5)
	HistogramVec(f, "test_run_seconds", "Runs, by outcome.", []float64{1}, "outcome").WithLabelValues("ok").Observe(2)
	want := `
# HELP test_calls_total Calls, by code.
# TYPE test_calls_total counter
test_calls_total{code="ok"} 1
# HELP test_events_total Events.
# TYPE test_events_total counter
test_events_total 2
# HELP test_level Level.
# TYPE test_level gauge
test_level 3
# HELP test_run_seconds Runs, by outcome.
# TYPE test_run_seconds histogram
test_run_seconds_bucket{outcome="ok",le="1"} 0
test_run_seconds_bucket{outcome="ok",le="+Inf"} 1
test_run_seconds_sum{outcome="ok"} 2
test_run_seconds_count{outcome="ok"} 1
# HELP test_sizes_bytes Sizes, by kind and part.
# TYPE test_sizes_bytes gauge
test_sizes_bytes{kind="a",part="b"} 4
# HELP test_wait_seconds Waits.
# TYPE test_wait_seconds histogram
test_wait_seconds_bucket{le="1"} 1
test_wait_seconds_bucket{le="+Inf"} 1
test_wait_seconds_sum 0.5
test_wait_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestARegisteredNamePanicsTheSecondTime(t *testing.T) {
	f := promauto.With(prometheus.NewRegistry())
	Gauge(f, "test_level", "Level.")
	defer func() {
		if recover() == nil {
			t.Error("a second gauge of the same name did not panic")
		}
	}()
	Gauge(f, "test_level", "Level.")
}
