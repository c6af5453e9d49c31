package server_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricName matches the metric names the compactor exposes (its own, and
// the Go and process collectors') inside a PromQL expression.
var metricName = regexp.MustCompile(`\b(?:compactor|process|go)_[a-zA-Z0-9_:]+`)

// queries returns every PromQL text of a Grafana dashboard: panel targets
// ("expr") and template variable queries ("query", "definition").
func queries(v any, key string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || (key == "templating" && (k == "query" || k == "definition"))) {
				*out = append(*out, s)
				continue
			}
			next := key
			if k == "templating" {
				next = k
			}
			queries(x, next, out)
		}
	case []any:
		for _, x := range v {
			queries(x, key, out)
		}
	}
}

// TestGrafanaDashboardQueriesOnlyMetricsTheServerExposes parses
// deploy/grafana/compactor.json, scrapes /metrics of a real server, and
// checks that every metric name a query uses is exposed.
func TestGrafanaDashboardQueriesOnlyMetricsTheServerExposes(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/compactor.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string           `json:"uid"`
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without uid or panels")
	}
	ids := map[float64]bool{}
	for _, p := range dash.Panels {
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel id %v used twice", id)
		}
		ids[id] = true
	}
	var all any
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	var qs []string
	queries(all, "", &qs)

	r := startApp(t, nil)
	_, _, body := r.get(t, r.base+"/metrics")
	exposed := map[string]bool{}
	for line := range strings.SplitSeq(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		exposed[name] = true
	}

	used := map[string]bool{}
	for _, q := range qs {
		for _, name := range metricName.FindAllString(q, -1) {
			used[name] = true
			if !exposed[name] {
				t.Errorf("the dashboard queries %s, which /metrics does not expose (query: %s)", name, q)
			}
		}
	}
	if len(used) < 15 {
		t.Errorf("the dashboard uses only %d metric names: %v", len(used), used)
	}
	// Families not charted: reported, not failed, so that a new metric can
	// land before its panel.
	var uncharted []string
	for name := range exposed {
		family := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "compactor_") && !used[name] && !used[family+"_bucket"] && !used[family+"_sum"] && !used[family+"_count"] && !used[family] {
			uncharted = append(uncharted, name)
		}
	}
	slices.Sort(uncharted)
	if len(uncharted) > 0 {
		t.Logf("compactor metrics without a panel: %v", uncharted)
	}
}
