package web_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/web"
	"github.com/compactorhq/compactor/web/webtest"
)

func TestDashboardShowsCountsRunningQueueAndHistory(t *testing.T) {
	e := newEnv(t, web.Config{})
	r := e.get("/")
	wantStatus(t, r, http.StatusOK)
	p := r.page(t)

	for id, want := range map[string]string{
		"count-running":       "2",
		"count-queued":        "2",
		"count-failed":        "1", // the other failure is 49 h old
		"count-dead-lettered": "1",
		"count-backlog":       "1,545",
	} {
		if got := p.One(t, id).Text(); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}

	running := p.ByTestID("running-job")
	if got, want := attrs(running, "data-job-id"), []string{webtest.RunningUnknown, webtest.RunningJob}; !slices.Equal(got, want) {
		t.Errorf("running rows %v, want %v (newest first)", got, want)
	}
	// The bar is the fraction of the whole job, the server's (all the log
	// read is not the end of the job), with the phase and its counters.
	known := running[1]
	bar := known.One(t, "job-progress")
	if v, _ := bar.Attr("value"); v != "450" {
		t.Errorf("progress value %q, want 450 (of 1000)", v)
	}
	if got := known.One(t, "job-phase").Text(); got != "writing blocks" {
		t.Errorf("phase %q, want writing blocks", got)
	}
	if got := known.One(t, "job-eta").Text(); got != "2m24s" {
		t.Errorf("ETA %q, want 2m24s", got)
	}
	if got := known.One(t, "job-elapsed").Text(); got != "1m12s" {
		t.Errorf("elapsed %q, want 1m12s", got)
	}
	if !strings.Contains(known.Text(), "44.9% · 1,200 / 1,200 records · 2 / 6 blocks") {
		t.Errorf("running row text %q lacks the progress figures", known.Text())
	}
	// An ETA the server cannot estimate is unknown, never 0.
	unknown := running[0]
	if got := unknown.One(t, "job-phase").Text(); got != "reading log" {
		t.Errorf("phase %q, want reading log", got)
	}
	if got := unknown.One(t, "job-eta").Text(); got != "unknown" {
		t.Errorf("ETA not estimated yet %q, want unknown", got)
	}

	// The queue in the Source's run order.
	if got, want := attrs(p.ByTestID("queue-row"), "data-job-id"), []string{webtest.QueuedHostile, webtest.QueuedOrders}; !slices.Equal(got, want) {
		t.Errorf("queue %v, want %v", got, want)
	}

	nodes := p.ByTestID("node-row")
	if got, want := attrs(nodes, "data-state"), []string{"alive", "gone"}; !slices.Equal(got, want) {
		t.Errorf("node states %v, want %v", got, want)
	}
	if text := nodes[0].Text(); !strings.Contains(text, "node-a") || !strings.Contains(text, "(this page)") {
		t.Errorf("the serving node's row %q lacks its name or the self mark", text)
	}

	history := p.ByTestID("history-row")
	wantHistory := []string{webtest.Succeeded, webtest.Cancelled, webtest.Nothing, webtest.Failed, webtest.OlderSuccess, webtest.OldFailure}
	if got := attrs(history, "data-job-id"); !slices.Equal(got, wantHistory) {
		t.Errorf("history %v, want %v", got, wantHistory)
	}
	for _, row := range history {
		if badge := row.One(t, "job-state").Text(); badge != row.Attrs["data-state"] {
			t.Errorf("row %s: badge %q, state %q", row.Attrs["data-job-id"], badge, row.Attrs["data-state"])
		}
	}
	if got := history[0].Text(); !strings.Contains(got, "1m12s") || !strings.Contains(got, "5,000") || !strings.Contains(got, "2026-11-30 11:40:02Z") || !strings.Contains(got, "19m ago") {
		t.Errorf("succeeded row %q lacks duration, records or start time", got)
	}
	if got := history[3].One(t, "job-error").Text(); !strings.HasPrefix(got, `write block 0007: blob store: "connection reset"`) {
		t.Errorf("failed row error %q", got)
	}

	dead := p.One(t, "dead-letter-list").ByTestID("dead-letter-item")
	if len(dead) != 1 || dead[0].Attrs["data-collection-id"] != webtest.Hostile {
		t.Fatalf("dead-lettered items %v", attrs(dead, "data-collection-id"))
	}
	if !strings.Contains(dead[0].Text(), webtest.HostileName) || !strings.Contains(dead[0].Text(), "5 failures") {
		t.Errorf("dead-letter item %q", dead[0].Text())
	}

	backlogs := p.One(t, "backlog-list").ByTestID("backlog-item")
	if got, want := attrs(backlogs, "data-collection-id"), []string{webtest.Orders, webtest.Hostile, webtest.Users}; !slices.Equal(got, want) {
		t.Errorf("backlogs %v, want %v (largest first, none empty)", got, want)
	}
	if got := backlogs[0].One(t, "backlog-value").Text(); got != "1,200" {
		t.Errorf("largest backlog %q", got)
	}

	if n := len(p.ByTestID("cancel-form")); n != 4 {
		t.Errorf("%d cancel forms, want 4 (two running, two queued)", n)
	}
	p.One(t, "filter-form")
	if main := p.All(func(n *node) bool { return n.Attrs["id"] == "main" }); len(main) != 1 {
		t.Error("no <main id=main>")
	} else if _, ok := main[0].Attr("data-live"); !ok {
		t.Error("main is not marked live")
	}
	if metas := p.All(func(n *node) bool { return n.Tag == "meta" && n.Attrs["http-equiv"] == "refresh" }); len(metas) != 1 || metas[0].Attrs["content"] != "10" {
		t.Error("no <noscript> meta refresh of 10 s")
	}
}

func TestDashboardHistoryFilters(t *testing.T) {
	tests := []struct {
		name      string
		query     string
		wantQuery web.JobQuery
		wantRows  []string
	}{
		{
			name:      "without filters the history is finished jobs, 50 at most",
			query:     "",
			wantQuery: web.JobQuery{States: []string{"SUCCEEDED", "FAILED", "CANCELLED"}, Limit: 50},
			wantRows:  []string{webtest.Succeeded, webtest.Cancelled, webtest.Nothing, webtest.Failed, webtest.OlderSuccess, webtest.OldFailure},
		},
		{
			name:      "a state selects that state only",
			query:     "state=FAILED",
			wantQuery: web.JobQuery{States: []string{"FAILED"}, Limit: 50},
			wantRows:  []string{webtest.Failed, webtest.OldFailure},
		},
		{
			name:      "state and trigger are case-insensitive and combine",
			query:     "state=cancelled&trigger=one_off",
			wantQuery: web.JobQuery{States: []string{"CANCELLED"}, Trigger: "ONE_OFF", Limit: 50},
			wantRows:  []string{webtest.Cancelled},
		},
		{
			name:      "a collection selects its jobs",
			query:     "collection=" + webtest.Orders,
			wantQuery: web.JobQuery{States: []string{"SUCCEEDED", "FAILED", "CANCELLED"}, CollectionID: webtest.Orders, Limit: 50},
			wantRows:  []string{webtest.Succeeded, webtest.OlderSuccess},
		},
		{
			name:      "all includes queued and running jobs",
			query:     "state=all&collection=" + webtest.Orders,
			wantQuery: web.JobQuery{States: []string{"QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}, CollectionID: webtest.Orders, Limit: 50},
			wantRows:  []string{webtest.QueuedOrders, webtest.RunningJob, webtest.Succeeded, webtest.OlderSuccess},
		},
		{
			name:      "several states",
			query:     "state=FAILED&state=CANCELLED",
			wantQuery: web.JobQuery{States: []string{"FAILED", "CANCELLED"}, Limit: 50},
			wantRows:  []string{webtest.Cancelled, webtest.Failed, webtest.OldFailure},
		},
		{
			name:      "unknown states and triggers are ignored",
			query:     "state=EXPLODED&trigger=cron",
			wantQuery: web.JobQuery{States: []string{"SUCCEEDED", "FAILED", "CANCELLED"}, Limit: 50},
			wantRows:  []string{webtest.Succeeded, webtest.Cancelled, webtest.Nothing, webtest.Failed, webtest.OlderSuccess, webtest.OldFailure},
		},
		{
			name:      "limit bounds the rows",
			query:     "limit=2",
			wantQuery: web.JobQuery{States: []string{"SUCCEEDED", "FAILED", "CANCELLED"}, Limit: 2},
			wantRows:  []string{webtest.Succeeded, webtest.Cancelled},
		},
		{
			name:      "limit is clamped to 500",
			query:     "limit=100000",
			wantQuery: web.JobQuery{States: []string{"SUCCEEDED", "FAILED", "CANCELLED"}, Limit: 500},
			wantRows:  []string{webtest.Succeeded, webtest.Cancelled, webtest.Nothing, webtest.Failed, webtest.OlderSuccess, webtest.OldFailure},
		},
		{
			name:      "nothing matches",
			query:     "state=FAILED&trigger=ONE_OFF",
			wantQuery: web.JobQuery{States: []string{"FAILED"}, Trigger: "ONE_OFF", Limit: 50},
			wantRows:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			r := e.get("/?" + tt.query)
			wantStatus(t, r, http.StatusOK)
			p := r.page(t)
			if got := attrs(p.ByTestID("history-row"), "data-job-id"); !slices.Equal(got, tt.wantRows) {
				t.Errorf("rows %v, want %v", got, tt.wantRows)
			}
			if tt.wantRows == nil {
				p.One(t, "history-empty")
			}
			// The history query is the second of the dashboard's four
			// (running, history, failed, succeeded for the throughput
			// chart; the queue has its own call).
			qs := e.src.Queries()
			if len(qs) != 4 {
				t.Fatalf("%d job queries, want 4", len(qs))
			}
			if got := qs[1]; fmt.Sprint(got) != fmt.Sprint(tt.wantQuery) {
				t.Errorf("history query %+v, want %+v", got, tt.wantQuery)
			}
		})
	}
}

func TestDashboardFilterFormShowsTheActiveFilter(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/?state=FAILED&trigger=SCHEDULED&collection=" + webtest.Hostile).page(t)
	form := p.One(t, "filter-form")
	selected := map[string]string{}
	for _, sel := range form.ByTag("select") {
		for _, o := range sel.ByTag("option") {
			if _, ok := o.Attr("selected"); ok {
				selected[sel.Attrs["name"]] = o.Attrs["value"]
			}
		}
	}
	want := map[string]string{"state": "FAILED", "trigger": "SCHEDULED", "collection": webtest.Hostile}
	if fmt.Sprint(selected) != fmt.Sprint(want) {
		t.Errorf("selected %v, want %v", selected, want)
	}
	p.One(t, "filter-clear")
}

func TestCollectionsSort(t *testing.T) {
	tests := []struct {
		query    string
		want     []string
		active   string // data-testid of the sorted column's link
		ariaSort string
	}{
		{"", []string{webtest.Hostile, webtest.Debian, webtest.Orders, webtest.Users}, "sort-name", "ascending"},
		{"sort=name&dir=desc", []string{webtest.Users, webtest.Orders, webtest.Debian, webtest.Hostile}, "sort-name", "descending"},
		{"sort=backlog", []string{webtest.Orders, webtest.Hostile, webtest.Users, webtest.Debian}, "sort-backlog", "descending"},
		{"sort=backlog&dir=asc", []string{webtest.Debian, webtest.Users, webtest.Hostile, webtest.Orders}, "sort-backlog", "ascending"},
		{"sort=records&dir=desc", []string{webtest.Debian, webtest.Orders, webtest.Users, webtest.Hostile}, "sort-records", "descending"},
		{"sort=last_compacted&dir=desc", []string{webtest.Orders, webtest.Users, webtest.Debian, webtest.Hostile}, "sort-last_compacted", "descending"},
		{"sort=last_compacted&dir=asc", []string{webtest.Hostile, webtest.Debian, webtest.Users, webtest.Orders}, "sort-last_compacted", "ascending"},
		{"sort=bogus&dir=sideways", []string{webtest.Hostile, webtest.Debian, webtest.Orders, webtest.Users}, "sort-name", "ascending"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			r := e.get("/collections?" + tt.query)
			wantStatus(t, r, http.StatusOK)
			p := r.page(t)
			if got := attrs(p.ByTestID("collection-row"), "data-collection-id"); !slices.Equal(got, tt.want) {
				t.Errorf("order %v, want %v", got, tt.want)
			}
			var sorted []string
			for _, th := range p.ByTag("th") {
				if s := th.Attrs["aria-sort"]; s != "" && s != "none" {
					sorted = append(sorted, th.Text()+"="+s)
				}
			}
			if len(sorted) != 1 || !strings.HasSuffix(sorted[0], "="+tt.ariaSort) {
				t.Errorf("aria-sort %v, want one column %s", sorted, tt.ariaSort)
			}
			// The active column's link flips the direction.
			link := p.One(t, tt.active).Attrs["href"]
			flip := map[string]string{"ascending": "dir=desc", "descending": "dir=asc"}[tt.ariaSort]
			if !strings.Contains(link, flip) {
				t.Errorf("link of the sorted column %q does not flip to %s", link, flip)
			}
		})
	}
}

func TestHostileContentRendersAsText(t *testing.T) {
	pages := []string{
		"/",
		"/?collection=" + webtest.Hostile + "&state=all",
		"/collections",
		"/collections/" + webtest.Hostile,
		"/jobs/" + webtest.QueuedHostile,
		"/jobs/" + webtest.Failed,
		"/?partial=1",
	}
	for _, path := range pages {
		t.Run(path, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			r := e.get(path)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Error("the hostile name is not shown escaped")
			}
			for _, bad := range []string{"<script>alert", "<b>left", "<img src=x"} {
				if strings.Contains(r.body, bad) {
					t.Errorf("page contains %q unescaped", bad)
				}
			}
			p := r.page(t)
			for _, s := range p.ByTag("script") {
				if !strings.HasPrefix(s.Attrs["src"], "/static/app.js?v=") || s.Text() != "" {
					t.Errorf("unexpected script element %v %q", s.Attrs, s.Text())
				}
			}
			if imgs := p.ByTag("img"); len(imgs) != 0 {
				t.Errorf("%d img elements injected", len(imgs))
			}
			if handlers := p.All(func(n *node) bool { _, ok := n.Attr("onerror"); return ok }); len(handlers) != 0 {
				t.Errorf("%d elements with an onerror attribute", len(handlers))
			}
			if !strings.Contains(p.Text(), webtest.HostileName) {
				t.Error("the hostile name does not read as text")
			}
		})
	}
}

func TestJobPageShowsEveryField(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/jobs/" + webtest.RunningJob).page(t)
	if got := p.One(t, "job-state").Text(); got != "RUNNING" {
		t.Errorf("state %q", got)
	}
	fields := map[string]string{}
	for _, dd := range p.One(t, "job-fields").ByTag("dd") {
		fields[dd.Attrs["data-field"]] = dd.Text()
	}
	want := map[string]string{
		"id":              webtest.RunningJob,
		"state":           "RUNNING",
		"collection":      "orders",
		"collection_id":   webtest.Orders,
		"kind":            "compaction",
		"trigger":         "scheduled",
		"triggered_by":    "the scheduler",
		"reason":          "backlog 1200 >= 10",
		"attempt":         "1",
		"node":            "node-a",
		"created":         "2026-11-30 11:58:40Z 1m ago",
		"started":         "2026-11-30 11:58:48Z 1m ago",
		"finished":        "—",
		"wait":            "8.0s",
		"duration":        "1m12s",
		"offsets":         "(60,000, 61,200]",
		"records_read":    "1,200 of 1,200",
		"records_written": "0",
		"bytes_written":   "0 B",
		"version":         "12 → —",
		"note":            "—",
		"error":           "—",
		"failure_class":   "—",
	}
	if fmt.Sprint(fields) != fmt.Sprint(want) {
		t.Errorf("fields\n got %v\nwant %v", fields, want)
	}
	panel := p.One(t, "job-progress-panel")
	if got := panel.One(t, "job-eta").Text(); got != "2m24s" {
		t.Errorf("ETA %q", got)
	}
	p.One(t, "cancel-form")

	failed := e.get("/jobs/" + webtest.Failed).page(t)
	if len(failed.ByTestID("cancel-form")) != 0 {
		t.Error("a finished job offers cancel")
	}
	if len(failed.ByTestID("job-progress-panel")) != 0 {
		t.Error("a finished job shows progress")
	}
	var errText string
	for _, dd := range failed.One(t, "job-fields").ByTag("dd") {
		if dd.Attrs["data-field"] == "error" {
			errText = dd.ByTag("pre")[0].Text()
		}
	}
	if !strings.Contains(errText, `"connection reset" <script>alert(3)</script> at segment.Write`) {
		t.Errorf("error text %q", errText)
	}
}

// TestTheKindOfEachJobIsShown: the history rows and a job's page name
// its kind; a job without one is a compaction.
func TestTheKindOfEachJobIsShown(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/").page(t)
	kinds := map[string]string{}
	for _, row := range p.ByTestID("history-row") {
		kinds[row.Attrs["data-job-id"]] = row.One(t, "job-kind").Text()
	}
	if kinds[webtest.Cancelled] != "index rebuild" || kinds[webtest.Succeeded] != "compaction" {
		t.Errorf("history kinds %v: want %s an index rebuild and %s a compaction", kinds, webtest.Cancelled, webtest.Succeeded)
	}
	for _, row := range append(p.ByTestID("running-job"), p.ByTestID("queue-row")...) {
		if got := row.One(t, "job-kind").Text(); got != "compaction" {
			t.Errorf("job %s of kind %q, want compaction", row.Attrs["data-job-id"], got)
		}
	}
	job := e.get("/jobs/" + webtest.Cancelled).page(t)
	var kind string
	for _, dd := range job.One(t, "job-fields").ByTag("dd") {
		if dd.Attrs["data-field"] == "kind" {
			kind = dd.Text()
		}
	}
	if kind != "index rebuild" {
		t.Errorf("job page kind %q, want index rebuild", kind)
	}
	if got := job.ByTag("p")[0].Text(); !strings.Contains(got, "one-off index rebuild of debian-packages") {
		t.Errorf("job page subtitle %q", got)
	}
}

func TestJobPageLooksUpTheCollectionName(t *testing.T) {
	e := newEnv(t, web.Config{})
	// QueuedOrders carries no collection name; the page asks for it.
	if got := e.get("/jobs/"+webtest.QueuedOrders).page(t).One(t, "job-collection").Text(); got != "orders" {
		t.Errorf("collection %q, want orders", got)
	}
}

func TestCollectionPageShowsFieldsJobsFormAndCharts(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/collections/" + webtest.Orders).page(t)
	if got := p.One(t, "collection-name").Text(); got != "orders" {
		t.Errorf("name %q", got)
	}
	form := p.One(t, "compact-form")
	if form.Attrs["method"] != "post" || form.Attrs["action"] != "/collections/"+webtest.Orders+"/compact" {
		t.Errorf("compact form %v", form.Attrs)
	}
	if got, want := attrs(p.ByTestID("history-row"), "data-job-id"), []string{webtest.QueuedOrders, webtest.RunningJob, webtest.Succeeded, webtest.OlderSuccess}; !slices.Equal(got, want) {
		t.Errorf("jobs %v, want %v", got, want)
	}
	// Durations: one bar per finished job, the longer one taller.
	bars := p.One(t, "chart-durations").ByTag("rect")
	if len(bars) != 2 {
		t.Fatalf("%d bars, want 2", len(bars))
	}
	if h0, h1 := bars[0].Attrs["height"], bars[1].Attrs["height"]; !(len(h0) > 0 && atof(t, h0) < atof(t, h1)) {
		t.Errorf("bar heights %s (25 s) and %s (72 s)", h0, h1)
	}
	line := p.One(t, "chart-backlog").ByTag("polyline")
	if len(line) != 1 || len(strings.Fields(line[0].Attrs["points"])) != 12 {
		t.Fatalf("backlog line %v", line)
	}

	// The version history, newest first: the rollback names what it
	// restored, who asked and why; compactions link their job.
	if got := texts(p.ByTestID("version-number")); !slices.Equal(got, []string{"12", "11", "10", "9"}) {
		t.Errorf("versions %v", got)
	}
	if got := texts(p.ByTestID("version-state")); !slices.Equal(got, []string{"current", "kept", "kept", "retired"}) {
		t.Errorf("version states %v", got)
	}
	origins := p.ByTestID("version-origin")
	if got := origins[0].Text(); !strings.HasPrefix(got, "rollback to 10 by alice@ops: version 11 dropped records") {
		t.Errorf("rollback origin %q", got)
	}
	if links := origins[0].ByTag("a"); len(links) != 1 || links[0].Attrs["href"] != "/jobs/"+webtest.Rollback {
		t.Errorf("the rollback's job link %v", links)
	}
	if links := origins[1].ByTag("a"); len(links) != 1 || links[0].Attrs["href"] != "/jobs/"+webtest.Succeeded {
		t.Errorf("version 11's job link %v", links)
	}
	if got := texts(p.ByTestID("version-offsets")); !slices.Equal(got, []string{"(60,500, 60,000]", "(60,000, 60,500]", "(59,000, 60,000]", "… 59,000]"}) {
		t.Errorf("version offsets %v", got)
	}

	empty := e.get("/collections/" + webtest.Users).page(t)
	if got := empty.One(t, "versions-empty").Text(); !strings.Contains(got, "No version yet") {
		t.Errorf("a collection without versions: %q", got)
	}
	if got := empty.One(t, "chart-backlog").Text(); !strings.Contains(got, "No backlog samples yet.") {
		t.Errorf("empty backlog chart %q", got)
	}
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(s, &f); err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return f
}

func TestPartialReturnsOnlyTheMainContent(t *testing.T) {
	e := newEnv(t, web.Config{})
	for _, path := range []string{"/?partial=1", "/collections?partial=1", "/jobs/" + webtest.RunningJob + "?partial=1", "/collections/" + webtest.Orders + "?partial=1"} {
		r := e.get(path)
		wantStatus(t, r, http.StatusOK)
		if strings.Contains(r.body, "<html") || strings.Contains(r.body, "<main") || strings.Contains(r.body, "topbar") {
			t.Errorf("%s: partial contains the frame", path)
		}
		parseHTML(t, r.body)
	}
}

func TestMissingJobsAndCollectionsAre404(t *testing.T) {
	e := newEnv(t, web.Config{})
	for _, path := range []string{"/jobs/nope", "/collections/nope", "/no/such/page", "/jobs/nope?partial=1"} {
		r := e.get(path)
		wantStatus(t, r, http.StatusNotFound)
		if p := r.page(t); p.One(t, "error-page").Attrs["data-status"] != "404" {
			t.Errorf("%s: no 404 page", path)
		}
	}
}

func TestSourceErrorsAre500WithoutDetail(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{"Jobs", "/"},
		{"Collections", "/"},
		{"Collections", "/collections"},
		{"Job", "/jobs/" + webtest.Failed},
		{"Collection", "/collections/" + webtest.Orders},
		{"BacklogHistory", "/collections/" + webtest.Orders},
		{"Collection", "/jobs/" + webtest.QueuedOrders}, // name lookup
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			e.src.FailWith(tc.method, errors.New("catalog: connection refused to db.internal:5432"))
			r := e.get(tc.path)
			wantStatus(t, r, http.StatusInternalServerError)
			if strings.Contains(r.body, "db.internal") {
				t.Error("the page shows the error's detail")
			}
			r.page(t).One(t, "error-page")
			logs := e.logs.String()
			if !strings.Contains(logs, `err="catalog: connection refused to db.internal:5432"`) {
				t.Errorf("the error is not logged under err:\n%s", logs)
			}
		})
	}
}

func TestStaticFilesAndHeaders(t *testing.T) {
	e := newEnv(t, web.Config{})
	p := e.get("/").page(t)
	var js, css string
	for _, s := range p.ByTag("script") {
		js = s.Attrs["src"]
	}
	for _, l := range p.ByTag("link") {
		if l.Attrs["rel"] == "stylesheet" {
			css = l.Attrs["href"]
		}
	}
	for _, tc := range []struct{ path, ctype, contains string }{
		{js, "text/javascript; charset=utf-8", "EventSource"},
		{css, "text/css; charset=utf-8", ".table-wrap"},
	} {
		r := e.get(tc.path)
		wantStatus(t, r, http.StatusOK)
		if got := r.Header.Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s: Content-Type %q", tc.path, got)
		}
		if got := r.Header.Get("Cache-Control"); !strings.Contains(got, "immutable") {
			t.Errorf("%s: versioned file not cached for good: %q", tc.path, got)
		}
		if !strings.Contains(r.body, tc.contains) {
			t.Errorf("%s lacks %q", tc.path, tc.contains)
		}
	}
	if got := e.get("/static/app.js?v=old").Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("stale version cached: %q", got)
	}
	wantStatus(t, e.get("/static/nope.js"), http.StatusNotFound)

	r := e.get("/")
	for h, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'",
		"X-Frame-Options":         "DENY",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := r.Header.Get(h); !strings.HasPrefix(got, want) {
			t.Errorf("%s = %q, want prefix %q", h, got, want)
		}
	}
}

func TestNewHandlerValidatesConfig(t *testing.T) {
	src := webtest.New(nil, nil)
	for _, cfg := range []web.Config{
		{ProtectReads: true},
		{RefreshSeconds: -1},
		{Heartbeat: -1},
		{MinEventInterval: -1},
		{MaxStreams: -1},
		{TrustedOrigins: []string{"not an origin"}},
	} {
		if _, err := web.NewHandler(src, cfg); err == nil {
			t.Errorf("NewHandler accepted %+v", cfg)
		}
	}
	if _, err := web.NewHandler(nil, web.Config{}); err == nil {
		t.Error("NewHandler accepted a nil source")
	}
	if _, err := web.NewHandler(src, web.Config{TrustedOrigins: []string{"https://ops.example.com"}}); err != nil {
		t.Errorf("NewHandler refused a trusted origin: %v", err)
	}
}

// TestStorageFiguresAndThroughput: the collections list and a collection's
// page show the current version's bytes and blocks and the versions kept;
// the dashboard and the collection page chart the bytes compactions wrote
// per minute in the last hour (the fixture's success, 1.5 MiB, 19 min ago).
func TestStorageFiguresAndThroughput(t *testing.T) {
	e := newEnv(t, web.Config{})
	list := e.get("/collections").page(t)
	var row *node
	for _, r := range list.ByTestID("collection-row") {
		if id, _ := r.Attr("data-collection-id"); id == webtest.Orders {
			row = r
		}
	}
	if row == nil {
		t.Fatal("no row of the orders collection")
	}
	for id, want := range map[string]string{"collection-segment-bytes": "8.3 MiB", "collection-blocks": "13", "collection-versions": "3"} {
		if got := row.One(t, id).Text(); got != want {
			t.Errorf("list %s = %q, want %q", id, got, want)
		}
	}
	page := e.get("/collections/" + webtest.Orders).page(t)
	fields := map[string]string{}
	for _, dd := range page.One(t, "collection-fields").ByTag("dd") {
		fields[dd.Attrs["data-field"]] = dd.Text()
	}
	for k, want := range map[string]string{"segment_bytes": "8.3 MiB", "blocks": "13", "versions_kept": "3"} {
		if !strings.Contains(fields[k], want) {
			t.Errorf("collection field %s = %q, want %q", k, fields[k], want)
		}
	}
	for _, p := range []*node{page, e.get("/").page(t)} {
		chart := p.One(t, "chart-throughput")
		if bars := chart.ByTag("rect"); len(bars) != 1 || !strings.Contains(bars[0].Text(), "1.5 MiB") {
			t.Errorf("throughput chart: %d bars (%v), want one of 1.5 MiB", len(bars), chart.Text())
		}
	}
}

// A throughput cap shows on the dashboard, and a running job writing blocks
// under it says it is throttled (on the dashboard and its own page), so that
// a slow job does not look stuck.
func TestAThroughputCapAndTheJobsItThrottlesAreShown(t *testing.T) {
	e := newEnv(t, web.Config{})
	if p := e.get("/").page(t); len(p.ByTestID("throughput-cap")) != 0 || len(p.ByTestID("job-throttled")) != 0 {
		t.Fatal("no cap is set, yet the dashboard shows one")
	}
	e.src.SetControls(web.Controls{MaxThroughput: 1 << 20, ThroughputOverride: true, ThroughputBy: "alice", ThroughputSince: webtest.Now.Add(-5 * time.Minute)})
	p := e.get("/").page(t)
	if got := p.One(t, "throughput-cap").Text(); !strings.Contains(got, "1.0 MiB/s") || !strings.Contains(got, "alice") || !strings.Contains(got, "5m ago") {
		t.Errorf("cap on the dashboard: %q, want the cap, who set it and when", got)
	}
	var row *node
	for _, r := range p.ByTestID("running-job") {
		if r.Attrs["data-job-id"] == webtest.RunningJob {
			row = r
		}
	}
	if row == nil {
		t.Fatal("no row of the running job")
	}
	if got := row.One(t, "job-throttled").Text(); got != "throttled to 1.0 MiB/s" {
		t.Errorf("running job: %q, want throttled to 1.0 MiB/s", got)
	}
	jp := e.get("/jobs/" + webtest.RunningJob).page(t)
	if got := jp.One(t, "job-progress-panel").One(t, "job-throttled").Text(); got != "throttled to 1.0 MiB/s" {
		t.Errorf("job page: %q", got)
	}
}

// TestCollectionsPageWalksForwardAndBack lists 250 collections (three
// pages of at most 100) in two orders: following the next links visits
// every collection once in order, the previous links walk back to the
// first page, and the count shows all of them.
func TestCollectionsPageWalksForwardAndBack(t *testing.T) {
	var cs []web.Collection
	for i := range 250 {
		cs = append(cs, web.Collection{ID: fmt.Sprintf("c-%03d", i), Name: fmt.Sprintf("coll-%03d", i), Backlog: int64(i % 7)})
	}
	for _, query := range []string{"", "sort=backlog&dir=desc"} {
		t.Run(query, func(t *testing.T) {
			e := newEnv(t, web.Config{})
			e.src.SetCollections(cs)
			path := "/collections?" + query
			var seen []string
			var pages []string
			for {
				r := e.get(path)
				wantStatus(t, r, http.StatusOK)
				p := r.page(t)
				if got := p.One(t, "collection-count").Text(); got != "250 collections" {
					t.Fatalf("count %q", got)
				}
				rows := attrs(p.ByTestID("collection-row"), "data-collection-id")
				if len(rows) == 0 || len(rows) > 100 {
					t.Fatalf("page %s: %d rows", path, len(rows))
				}
				seen = append(seen, rows...)
				pages = append(pages, path)
				next := p.ByTestID("collections-next")
				if len(next) == 0 {
					break
				}
				path = next[0].Attrs["href"]
				if len(pages) > 5 {
					t.Fatal("more than 5 pages of 100 for 250 collections")
				}
			}
			if len(pages) != 3 || len(seen) != 250 || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != 250 {
				t.Fatalf("%d pages, %d rows (%d distinct); want 3 pages of every collection once", len(pages), len(seen), len(slices.Compact(slices.Sorted(slices.Values(seen)))))
			}
			if query == "" && (seen[0] != "c-000" || seen[249] != "c-249") {
				t.Fatalf("by name: first %s, last %s", seen[0], seen[249])
			}
			// Back from the last page: the previous links end on the
			// first page's rows, with no previous link there.
			var back []string
			for range 2 {
				r := e.get(path)
				p := r.page(t)
				prev := p.ByTestID("collections-prev")
				if len(prev) == 0 {
					t.Fatalf("no previous link on %s", path)
				}
				path = prev[0].Attrs["href"]
				back = attrs(e.get(path).page(t).ByTestID("collection-row"), "data-collection-id")
			}
			if !slices.Equal(back, seen[:100]) {
				t.Fatalf("back on the first page: %v..., want %v...", back[:3], seen[:3])
			}
			if first := e.get(path).page(t); len(first.ByTestID("collections-prev")) != 0 {
				t.Fatal("the first page, reached backwards, links to a previous one")
			}
		})
	}
}

// TestDashboardWithManyCollectionsTakesAnID: beyond the filter's choices,
// the history filter takes a collection id instead of listing names, and
// the tiles still count every collection's backlog.
func TestDashboardWithManyCollectionsTakesAnID(t *testing.T) {
	e := newEnv(t, web.Config{})
	var cs []web.Collection
	for i := range 250 {
		cs = append(cs, web.Collection{ID: fmt.Sprintf("c-%03d", i), Name: fmt.Sprintf("coll-%03d", i), Backlog: 2})
	}
	e.src.SetCollections(cs)
	p := e.get("/?collection=c-007").page(t)
	if got := p.One(t, "filter-collection-id").Attrs["value"]; got != "c-007" {
		t.Fatalf("collection id input holds %q, want c-007", got)
	}
	for _, sel := range p.One(t, "filter-form").ByTag("select") {
		if sel.Attrs["name"] == "collection" {
			t.Fatal("a collection select with 250 collections")
		}
	}
	if got := p.One(t, "count-backlog").Text(); !strings.Contains(got, "500") {
		t.Fatalf("total backlog tile %q, want 500", got)
	}
	if got := len(p.ByTestID("backlog-item")); got != 10 {
		t.Fatalf("%d largest backlogs shown, want 10", got)
	}
}
