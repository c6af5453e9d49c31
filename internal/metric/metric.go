// Package metric declares Prometheus metrics from their name, help text and
// label names, on the factory of the registerer a package's constructor was
// given (promauto.With(reg), DESIGN.md §8): one call a metric instead of an
// options struct each. Metrics that need more options (constant labels,
// native histograms) are declared with promauto directly.
//
// Every function registers at once and panics, as promauto does, when the
// registerer refuses the metric (a name registered twice, an invalid name).
// The package is a leaf: it imports nothing of the project.
package metric

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Counter registers and returns an unlabelled counter.
func Counter(f promauto.Factory, name, help string) prometheus.Counter {
	return f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Gauge registers and returns an unlabelled gauge.
func Gauge(f promauto.Factory, name, help string) prometheus.Gauge {
	return f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// CounterVec registers and returns a counter with the label names labels.
func CounterVec(f promauto.Factory, name, help string, labels ...string) *prometheus.CounterVec {
	return f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// GaugeVec registers and returns a gauge with the label names labels.
func GaugeVec(f promauto.Factory, name, help string, labels ...string) *prometheus.GaugeVec {
	return f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// Histogram registers and returns an unlabelled histogram with the bucket
// upper bounds buckets (prometheus.DefBuckets when nil).
func Histogram(f promauto.Factory, name, help string, buckets []float64) prometheus.Histogram {
	return f.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec registers and returns a histogram with the bucket upper
// bounds buckets (prometheus.DefBuckets when nil) and the label names
// labels.
func HistogramVec(f promauto.Factory, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
