package manager

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/metric"
)

// freshnessGauges export each collection's freshness against its
// objectives, for the collections that have one: their count is the
// operator's to bound (one set of series per collection with an
// objective), and they carry the collection's name, as the issue of an
// objective is per collection. The shipped recording rules turn
// compactor_freshness_objective_breached into burn rates
// (deploy/prometheus/alerts.yml). Updated at every scheduler run, by the
// replica holding the scheduler's lease.
type freshnessGauges struct {
	maxAge, maxBacklog, age, backlog, debt, breached *prometheus.GaugeVec
	atRisk                                           prometheus.Gauge

	mu    sync.Mutex
	names map[string]bool // collections with series now
}

func newFreshnessGauges(f promauto.Factory) *freshnessGauges {
	vec := func(name, help string) *prometheus.GaugeVec { return metric.GaugeVec(f, name, help, "collection") }
	return &freshnessGauges{
		maxAge:     vec("compactor_freshness_objective_age_seconds", "A collection's objective for the age of its oldest uncompacted record; 0: none. Only collections with an objective."),
		maxBacklog: vec("compactor_freshness_objective_backlog_records", "A collection's objective for its uncompacted backlog; 0: none. Only collections with an objective."),
		age:        vec("compactor_freshness_age_seconds", "Age of a collection's oldest uncompacted record, as of the last scheduler run. Only collections with an objective."),
		backlog:    vec("compactor_freshness_backlog_records", "A collection's uncompacted backlog, as of the last scheduler run. Only collections with an objective."),
		debt:       vec("compactor_freshness_debt_ratio", "The larger of age over its objective and backlog over its objective: 1 and more breaks the objective. Only collections with an objective."),
		breached:   vec("compactor_freshness_objective_breached", "1 while a collection breaks a freshness objective, 0 otherwise (the SLI of the burn-rate alerts). Only collections with an objective."),
		atRisk:     metric.Gauge(f, "compactor_collections_at_risk", "Collections whose freshness debt is at least 0.8 (at risk of breaking, or breaking, an objective), as of the last scheduler run."),
		names:      map[string]bool{},
	}
}

// replace sets the gauges from a plan's entries: series for the
// collections with an objective, none for the others.
func (g *freshnessGauges) replace(entries []PlanEntry) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := make(map[string]bool, len(g.names))
	risk := 0
	for _, e := range entries {
		f := e.Freshness
		if !f.Objective() {
			continue
		}
		n := e.Collection.Name
		seen[n] = true
		g.maxAge.WithLabelValues(n).Set(f.MaxAge.Seconds())
		g.maxBacklog.WithLabelValues(n).Set(float64(f.MaxBacklog))
		g.age.WithLabelValues(n).Set(f.Age.Seconds())
		g.backlog.WithLabelValues(n).Set(float64(f.Backlog))
		g.debt.WithLabelValues(n).Set(f.Debt)
		g.breached.WithLabelValues(n).Set(boolGauge(f.Breached()))
		if f.AtRisk() {
			risk++
		}
	}
	for n := range g.names {
		if !seen[n] {
			for _, v := range []*prometheus.GaugeVec{g.maxAge, g.maxBacklog, g.age, g.backlog, g.debt, g.breached} {
				v.DeleteLabelValues(n)
			}
		}
	}
	g.names = seen
	g.atRisk.Set(float64(risk))
}
