package web

import (
	"cmp"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compactorhq/compactor/internal/jobtype"
)

// The view structs below are everything the templates print. They are built
// by plain functions from the Source's models and a clock, so the templates
// hold no logic beyond loops and conditions, and tests can build them too.

// pageMeta is what the layout needs around a page's main content.
type pageMeta struct {
	Title     string
	Section   string // "dashboard", "collections" or "" (for the nav)
	Refresh   int    // <noscript> meta refresh seconds; 0: none
	Live      bool   // the page follows /events
	StyleURL  string
	ScriptURL string
	IconURL   string
	Auth      authView
	Flash     *flashView
	Build     buildView
}

// buildView is the footer line of the running build; empty Version: no
// footer.
type buildView struct {
	Version  string
	Revision string // shortened
	Full     string // the full revision, as a tooltip
	Time     string
	Modified bool
}

type authView struct {
	Required  bool   // credentials are configured
	SignedIn  bool   // the request carries one
	Principal string // the signed-in credential's name
	Role      string // its role
	MayAudit  bool   // the role may read the audit log (operator, admin)
	LoginURL  string // /login?next=<this page>
	LogoutURL string
}

// actView is what an action form needs: whether it may be shown, where to
// come back to, and where to sign in otherwise.
type actView struct {
	Allowed bool // the principal's role may act (operator or admin)
	// SignedIn: the request is signed in, as Principal with Role (which
	// does not allow the action when Allowed is false).
	SignedIn  bool
	Principal string
	Role      string
	Next      string
	LoginURL  string
}

type flashView struct {
	Kind     string // "ok" or "error"
	Text     string
	LinkText string
	LinkURL  string
}

// flashFor turns the flash query parameters of a redirect after an action
// into a message. Only known codes show, so a crafted link cannot put
// arbitrary text on the page.
func flashFor(q url.Values) *flashView {
	f, ok := flashes[q.Get("flash")]
	if !ok {
		return nil
	}
	if id := q.Get("job"); id != "" && q.Get("flash") == "compact-queued" {
		f.Text = "Compaction queued as job"
		f.LinkText, f.LinkURL = id, jobURL(id)
	}
	return &f
}

// flashes are the flash messages by code (flashFor).
var flashes = map[string]flashView{
	"compact-queued":   {Kind: "ok", Text: "Compaction queued."},
	"compact-refused":  {Kind: "error", Text: "The collection cannot be compacted now."},
	"cancel-requested": {Kind: "ok", Text: "Cancellation requested. A running job stops at its next batch boundary and commits nothing."},
	"paused":           {Kind: "ok", Text: "Automatic compaction paused. One-off compactions still run."},
	"resumed":          {Kind: "ok", Text: "Automatic compaction resumed."},
	"cancel-refused":   {Kind: "error", Text: "The job has already finished; there is nothing to cancel."},
	"signed-in":        {Kind: "ok", Text: "Signed in."},
	"signed-out":       {Kind: "ok", Text: "Signed out."},
}

// jobRow is one job in a table.
type jobRow struct {
	ID             string
	ShortID        string
	URL            string
	CollectionID   string
	CollectionName string
	CollectionURL  string
	State          string
	StateClass     string
	Kind           string // for humans: "compaction", "index rebuild"
	Trigger        string
	Reason         string // full text (title attribute)
	ReasonShort    string
	Error          string
	ErrorShort     string
	Note           string
	Attempt        string
	Created        timeView
	Started        timeView
	Finished       timeView
	Duration       string // run time; running: so far; "—" before start
	Wait           string // time queued (so far, for a queued job)
	RecordsRead    string
	RecordsWritten string
	Progress       runProgress
	Cancelable     bool
	CancelURL      string
}

func newJobRow(now time.Time, j Job, names map[string]string) jobRow {
	name := j.CollectionName
	if name == "" {
		name = names[j.CollectionID]
	}
	if name == "" {
		name = j.CollectionID
	}
	r := jobRow{
		ID:             j.ID,
		ShortID:        shortID(j.ID),
		URL:            jobURL(j.ID),
		CollectionID:   j.CollectionID,
		CollectionName: name,
		CollectionURL:  collectionURL(j.CollectionID),
		State:          j.State,
		StateClass:     stateClass(j.State),
		Kind:           kindLabel(j.Kind),
		Trigger:        triggerLabel(j.Trigger),
		Reason:         j.Reason,
		ReasonShort:    truncate(firstLine(j.Reason), 60),
		Error:          j.Error,
		ErrorShort:     truncate(firstLine(j.Error), 80),
		Note:           j.Note,
		Attempt:        strconv.Itoa(j.Attempt),
		Created:        newTimeView(now, j.CreatedAt),
		Started:        newTimeView(now, j.StartedAt),
		Finished:       newTimeView(now, j.FinishedAt),
		Duration:       dash,
		Wait:           dash,
		RecordsRead:    fmtCount(j.RecordsRead),
		RecordsWritten: fmtCount(j.RecordsWritten),
		Cancelable:     j.State == StateQueued || j.State == StateRunning,
		CancelURL:      jobURL(j.ID) + "/cancel",
	}
	switch {
	case !j.StartedAt.IsZero() && !j.FinishedAt.IsZero():
		r.Duration = fmtDuration(j.FinishedAt.Sub(j.StartedAt))
	case !j.StartedAt.IsZero() && j.State == StateRunning:
		r.Duration = fmtDuration(now.Sub(j.StartedAt))
	}
	switch {
	case !j.CreatedAt.IsZero() && !j.StartedAt.IsZero():
		r.Wait = fmtDuration(j.StartedAt.Sub(j.CreatedAt))
	case !j.CreatedAt.IsZero() && j.State == StateQueued:
		r.Wait = fmtDuration(now.Sub(j.CreatedAt))
	case !j.CreatedAt.IsZero() && !j.FinishedAt.IsZero():
		r.Wait = fmtDuration(j.FinishedAt.Sub(j.CreatedAt)) // cancelled while queued
	}
	if j.State == StateRunning {
		r.Progress = newRunProgress(now, j)
	}
	return r
}

// runProgress is a running job's progress as the page shows it: its phase,
// the fraction of the whole job (every phase counts, so the bar reaches 100%
// only when the job ends), counters, and the ETA the server estimated.
type runProgress struct {
	Phase   string // "writing blocks"; "starting" before the first report
	Value   string // for <progress max="1000" value>, per mille
	Percent string // "34.5%"
	Text    string // "3,450 / 10,000 records · 2 / 4 blocks"
	Elapsed string // "1m12s"
	// ETA is "2m17s", or "unknown" when the server cannot estimate it
	// yet (never "0s" while the job runs).
	ETA      string
	ETAKnown bool
	// Throttled: the job writes blocks under a throughput cap, described by
	// Cap ("1.0 MiB/s"); its progress moves at the cap's pace.
	Throttled bool
	Cap       string
}

// throttle marks p throttled when a cap (bytes per second, 0: none) is in
// force while its job writes blocks, the phase the cap slows.
func (p *runProgress) throttle(capBps int64) {
	if capBps <= 0 || p.Phase != phaseWriting {
		return
	}
	p.Throttled, p.Cap = true, fmtBytes(capBps)+"/s"
}

// phaseWriting is the phase whose blob writes a throughput cap slows.
const phaseWriting = "writing blocks"

// throughputView describes the throughput cap in force, for the dashboard.
type throughputView struct {
	Capped bool
	Cap    string // "1.0 MiB/s"
	Source string // "set for every node at run time by alice, 5m ago", "--max-throughput of this node"
	Since  timeView
}

func newThroughputView(now time.Time, c Controls) throughputView {
	if c.MaxThroughput <= 0 {
		return throughputView{}
	}
	v := throughputView{Capped: true, Cap: fmtBytes(c.MaxThroughput) + "/s", Source: "--max-throughput of this node"}
	if c.ThroughputOverride {
		v.Source = "set for every node at run time"
		if c.ThroughputBy != "" {
			v.Source += " by " + c.ThroughputBy
		}
		if !c.ThroughputSince.IsZero() {
			v.Since = newTimeView(now, c.ThroughputSince)
			v.Source += ", " + v.Since.Rel
		}
	}
	return v
}

// etaUnknown is the ETA text of a job whose ETA cannot be estimated.
const etaUnknown = "unknown"

func newRunProgress(now time.Time, j Job) runProgress {
	f := math.Max(0, math.Min(1, j.Fraction))
	p := runProgress{
		Phase:   cmp.Or(j.Phase, "starting"),
		Value:   strconv.Itoa(int(math.Round(f * 1000))),
		Percent: strconv.FormatFloat(math.Floor(f*1000)/10, 'f', 1, 64) + "%",
		Elapsed: dash,
		ETA:     etaUnknown,
	}
	if !j.StartedAt.IsZero() {
		p.Elapsed = fmtDuration(now.Sub(j.StartedAt))
	}
	if j.ETAKnown && j.ETA > 0 {
		p.ETA, p.ETAKnown = fmtDuration(max(j.ETA, time.Second).Round(time.Second)), true
	}
	var parts []string
	if j.RecordsTotal > 0 {
		parts = append(parts, fmtCount(j.RecordsRead)+" / "+fmtCount(j.RecordsTotal)+" records")
	} else if j.RecordsRead > 0 {
		parts = append(parts, fmtCount(j.RecordsRead)+" records read")
	}
	if j.BlocksTotal > 0 {
		parts = append(parts, fmtCount(j.BlocksWritten)+" / "+fmtCount(j.BlocksTotal)+" blocks")
	}
	if j.VectorsTotal > 0 {
		parts = append(parts, fmtCount(j.VectorsIndexed)+" / "+fmtCount(j.VectorsTotal)+" vectors")
	}
	p.Text = strings.Join(parts, " · ")
	return p
}

func jobRows(now time.Time, jobs []Job, names map[string]string) []jobRow {
	rows := make([]jobRow, len(jobs))
	for i, j := range jobs {
		rows[i] = newJobRow(now, j, names)
	}
	return rows
}

func collectionNames(cs []Collection) map[string]string {
	m := make(map[string]string, len(cs))
	for _, c := range cs {
		m[c.ID] = c.Name
	}
	return m
}

// ---- dashboard ----

const (
	defaultHistoryLimit = 50
	maxHistoryLimit     = 500
	failedWindow        = 24 * time.Hour
	failedScanLimit     = 1000
	throughputScanLimit = 1000 // succeeded jobs read for the throughput chart (its last hour)
	queueShown          = 50
	backlogShown        = 10
	// filterChoices is the most collections the history filter lists;
	// with more, it takes a collection id.
	filterChoices = 200
)

// The lists below are functions, not variables, so that nothing (a Source
// keeping a query's States, say) can change them for the next request.

func allStates() []string {
	return []string{StateQueued, StateRunning, StateSucceeded, StateFailed, StateCancelled}
}

func finishedStates() []string { return []string{StateSucceeded, StateFailed, StateCancelled} }

func allTriggers() []string { return []string{TriggerScheduled, TriggerOneOff} }

// dashboardFilter is the history filter from the query string.
type dashboardFilter struct {
	States       []string // empty: finished states
	Trigger      string
	CollectionID string
	Limit        int
}

func (f dashboardFilter) active() bool {
	return len(f.States) > 0 || f.Trigger != "" || f.CollectionID != ""
}

// parseDashboardFilter reads state (repeatable), trigger, collection and
// limit. Unknown states and triggers are ignored; limit is clamped.
func parseDashboardFilter(q url.Values) dashboardFilter {
	f := dashboardFilter{Limit: defaultHistoryLimit}
	for _, s := range q["state"] {
		s = strings.ToUpper(strings.TrimSpace(s))
		if s == "ALL" {
			f.States = allStates()
			break
		}
		if slices.Contains(allStates(), s) && !slices.Contains(f.States, s) {
			f.States = append(f.States, s)
		}
	}
	if t := strings.ToUpper(strings.TrimSpace(q.Get("trigger"))); slices.Contains(allTriggers(), t) {
		f.Trigger = t
	}
	f.CollectionID = strings.TrimSpace(q.Get("collection"))
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n > 0 {
		f.Limit = min(n, maxHistoryLimit)
	}
	return f
}

// historyQuery is the Source query for the history table.
func (f dashboardFilter) historyQuery() JobQuery {
	q := JobQuery{States: f.States, Trigger: f.Trigger, CollectionID: f.CollectionID, Limit: f.Limit}
	if len(q.States) == 0 {
		q.States = finishedStates()
	}
	return q
}

// dashboardData is what the dashboard handler fetched.
type dashboardData struct {
	Running     []Job
	Queued      []Job // in run order
	Nodes       []Node
	Controls    Controls
	History     []Job
	Failed      []Job // most recent failed jobs, up to failedScanLimit
	Succeeded   []Job // most recent succeeded jobs, up to throughputScanLimit
	Collections CollectionSummary
	Filter      dashboardFilter
	Act         actView
}

type dashboardView struct {
	Tiles        []tileView
	Throttle     throughputView
	Running      []jobRow
	Queue        []jobRow
	QueueMore    int
	Nodes        []nodeRow
	Pause        pauseView
	History      []jobRow
	HistoryTitle string
	Filter       filterView
	DeadLettered []collectionItem
	Backlogs     []collectionItem
	// AtRisk: collections whose freshness debt reached atRiskDebt, the
	// largest debt first.
	AtRisk     []collectionItem
	Throughput chartView
	Act        actView
}

// pauseView is the state of automatic compaction, globally or for one
// collection, with the form that flips it.
type pauseView struct {
	Paused    bool
	Text      string // "paused since … by …: reason", or "running"
	ActionURL string // POST here to flip it
}

func newPauseView(now time.Time, paused bool, reason, by string, since time.Time, base string) pauseView {
	if !paused {
		return pauseView{Text: "running", ActionURL: base + "/pause"}
	}
	text := "paused since " + newTimeView(now, since).Text
	if by != "" {
		text += " by " + by
	}
	if reason != "" {
		text += ": " + reason
	}
	return pauseView{Paused: true, Text: text, ActionURL: base + "/resume"}
}

// nodeRow is one replica in the nodes panel.
type nodeRow struct {
	Name, Address, Version string
	State                  string // "alive" or "gone"
	Self                   bool
	Started, Heartbeat     timeView
}

type tileView struct {
	TestID string
	Label  string
	Value  string
	Hint   string
	URL    string
	Alert  bool // draws attention (failures, dead letters)
}

type option struct {
	Value    string
	Label    string
	Selected bool
}

type filterView struct {
	States   []option
	Triggers []option
	// Collections are the collection filter's choices; with too many
	// collections to list, none, and CollectionID is typed instead.
	Collections  []option
	CollectionID string
	Limit        string
	Active       bool
}

type collectionItem struct {
	ID        string
	Name      string
	URL       string
	Backlog   string
	Failures  string
	Debt      string   // freshness debt, "0.85"
	Objective string   // the objectives in words
	Since     timeView // dead-lettered since
	Oldest    timeView // oldest uncompacted record
}

func buildDashboard(now time.Time, d dashboardData) dashboardView {
	sum := d.Collections
	names := collectionNames(slices.Concat(sum.Names, sum.Largest, sum.Notable))
	v := dashboardView{Act: d.Act}

	v.Running = jobRows(now, d.Running, names)
	for i := range v.Running {
		v.Running[i].Progress.throttle(d.Controls.MaxThroughput)
	}
	v.Throttle = newThroughputView(now, d.Controls)
	v.Throughput = throughputChart(now, d.Succeeded)

	queued := d.Queued // in run order, as the Source claims them
	if len(queued) > queueShown {
		v.QueueMore = len(queued) - queueShown
		queued = queued[:queueShown]
	}
	v.Queue = jobRows(now, queued, names)
	v.Pause = newPauseView(now, d.Controls.Paused, d.Controls.Reason, d.Controls.By, d.Controls.Since, "")
	for _, n := range d.Nodes {
		state := "alive"
		if !n.Alive {
			state = "gone"
		}
		v.Nodes = append(v.Nodes, nodeRow{Name: n.Name, Address: n.Address, Version: n.Version, State: state, Self: n.Self,
			Started: newTimeView(now, n.StartedAt), Heartbeat: newTimeView(now, n.HeartbeatAt)})
	}

	v.History = jobRows(now, d.History, names)
	if d.Filter.active() {
		v.HistoryTitle = "History (filtered, newest first)"
	} else {
		v.HistoryTitle = "Recent history (finished jobs, newest first)"
	}

	failed := 0
	for _, j := range d.Failed {
		at := j.FinishedAt
		if at.IsZero() {
			at = j.CreatedAt
		}
		if now.Sub(at) <= failedWindow {
			failed++
		}
	}
	failedText := strconv.Itoa(failed)
	if len(d.Failed) >= failedScanLimit && failed == len(d.Failed) {
		failedText += "+"
	}

	backlog := sum.Backlog
	var dead, backlogs, risky []Collection
	for _, c := range sum.Notable {
		if c.DeadLettered {
			dead = append(dead, c)
		}
		if c.FreshnessDebt >= atRiskDebt {
			risky = append(risky, c)
		}
	}
	for _, c := range sum.Largest {
		if c.Backlog > 0 {
			backlogs = append(backlogs, c)
		}
	}
	slices.SortFunc(dead, func(a, b Collection) int {
		return cmp.Or(a.DeadLetteredAt.Compare(b.DeadLetteredAt), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	slices.SortFunc(backlogs, func(a, b Collection) int {
		return cmp.Or(cmp.Compare(b.Backlog, a.Backlog), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	if len(backlogs) > backlogShown {
		backlogs = backlogs[:backlogShown]
	}
	for _, c := range dead {
		v.DeadLettered = append(v.DeadLettered, newCollectionItem(now, c))
	}
	for _, c := range backlogs {
		v.Backlogs = append(v.Backlogs, newCollectionItem(now, c))
	}
	slices.SortFunc(risky, func(a, b Collection) int {
		return cmp.Or(cmp.Compare(b.FreshnessDebt, a.FreshnessDebt), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	for _, c := range risky {
		item := newCollectionItem(now, c)
		item.Debt, item.Objective = debtText(c.FreshnessDebt), objectivesText(c)
		v.AtRisk = append(v.AtRisk, item)
	}

	v.Tiles = []tileView{
		{TestID: "count-running", Label: "Running", Value: strconv.Itoa(len(d.Running)), URL: "#running"},
		{TestID: "count-queued", Label: "Queued", Value: strconv.Itoa(len(d.Queued)), URL: "#queue"},
		{TestID: "count-failed", Label: "Failed (24 h)", Value: failedText, URL: "/?state=FAILED#history", Alert: failed > 0},
		{TestID: "count-dead-lettered", Label: "Dead-lettered", Value: strconv.Itoa(len(dead)), URL: "#dead-lettered", Alert: len(dead) > 0},
		{TestID: "count-backlog", Label: "Total backlog", Value: fmtCount(backlog), Hint: "records", URL: "/collections?sort=backlog&dir=desc"},
	}

	v.Filter = filterView{Limit: strconv.Itoa(d.Filter.Limit), Active: d.Filter.active()}
	v.Filter.States = append(v.Filter.States,
		option{Value: "", Label: "finished", Selected: len(d.Filter.States) == 0},
		option{Value: "all", Label: "all", Selected: len(d.Filter.States) == len(allStates())})
	for _, s := range allStates() {
		v.Filter.States = append(v.Filter.States, option{Value: s, Label: strings.ToLower(s), Selected: len(d.Filter.States) == 1 && d.Filter.States[0] == s})
	}
	v.Filter.Triggers = []option{{Value: "", Label: "any", Selected: d.Filter.Trigger == ""}}
	for _, t := range allTriggers() {
		v.Filter.Triggers = append(v.Filter.Triggers, option{Value: t, Label: triggerLabel(t), Selected: d.Filter.Trigger == t})
	}
	if len(sum.Names) < sum.Count {
		// Too many to choose from: the filter takes an id.
		v.Filter.CollectionID = d.Filter.CollectionID
		return v
	}
	v.Filter.Collections = []option{{Value: "", Label: "any", Selected: d.Filter.CollectionID == ""}}
	sorted := slices.Clone(sum.Names)
	slices.SortFunc(sorted, func(a, b Collection) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	found := d.Filter.CollectionID == ""
	for _, c := range sorted {
		sel := c.ID == d.Filter.CollectionID
		found = found || sel
		v.Filter.Collections = append(v.Filter.Collections, option{Value: c.ID, Label: c.Name, Selected: sel})
	}
	if !found {
		v.Filter.Collections = append(v.Filter.Collections, option{Value: d.Filter.CollectionID, Label: d.Filter.CollectionID + " (unknown)", Selected: true})
	}
	return v
}

func newCollectionItem(now time.Time, c Collection) collectionItem {
	return collectionItem{
		ID:       c.ID,
		Name:     c.Name,
		URL:      collectionURL(c.ID),
		Backlog:  fmtCount(c.Backlog),
		Failures: strconv.Itoa(c.FailureCount),
		Since:    newTimeView(now, c.DeadLetteredAt),
		Oldest:   newTimeView(now, c.OldestUncompactedAt),
	}
}

// ---- collections ----

type collectionsView struct {
	Headers []sortHeader
	Rows    []collectionRow
	Count   string // collections in all
	Shown   string // "100 on this page"
	// PrevURL and NextURL are the pages before and after this one ("":
	// none); FirstURL the first page, for a page past the end.
	PrevURL, NextURL, FirstURL string
}

type sortHeader struct {
	Label    string
	Key      string // sort key; "" when the column does not sort
	URL      string
	AriaSort string // "ascending", "descending" or "none"
	Arrow    string
	Numeric  bool
}

type collectionRow struct {
	ID               string
	ShortID          string // the first 8 characters of ID, as the CLI accepts them
	Name             string
	URL              string
	Dimension        string
	Backlog          string
	Records          string
	Version          string
	LogPosition      string
	CompactionOffset string
	Failures         string
	DeadLettered     bool
	Oldest           timeView
	LastCompacted    timeView
	Created          timeView
	SegmentBytes     string // "1.5 MiB"
	Blocks           string
	VersionsKept     string
}

func newCollectionRow(now time.Time, c Collection) collectionRow {
	return collectionRow{
		ID:               c.ID,
		ShortID:          shortID(c.ID),
		Name:             c.Name,
		URL:              collectionURL(c.ID),
		Dimension:        strconv.Itoa(c.Dimension),
		Backlog:          fmtCount(c.Backlog),
		Records:          fmtCount(c.RecordCount),
		Version:          strconv.FormatInt(c.SegmentVersion, 10),
		LogPosition:      fmtCount(c.LogPosition),
		CompactionOffset: fmtCount(c.CompactionOffset),
		Failures:         strconv.Itoa(c.FailureCount),
		DeadLettered:     c.DeadLettered,
		Oldest:           newTimeView(now, c.OldestUncompactedAt),
		LastCompacted:    newTimeView(now, c.LastCompactedAt),
		Created:          newTimeView(now, c.CreatedAt),
		SegmentBytes:     fmtBytes(c.SegmentBytes),
		Blocks:           fmtCount(int64(c.BlockCount)),
		VersionsKept:     strconv.Itoa(c.VersionsKept),
	}
}

// collectionsPageSize is the most collections a page of the collections
// table lists.
const collectionsPageSize = 100

// collectionSort is the sort order of the collections page.
type collectionSort struct {
	Key  string // name, backlog, records, last_compacted
	Desc bool
}

// parseCollectionSort reads sort and dir. Unknown keys fall back to name;
// without dir, names sort ascending and figures descending (largest first).
func parseCollectionSort(q url.Values) collectionSort {
	s := collectionSort{Key: strings.ToLower(q.Get("sort"))}
	if !slices.Contains([]string{SortName, SortBacklog, SortRecords, SortLastCompacted}, s.Key) {
		s.Key = SortName
	}
	switch strings.ToLower(q.Get("dir")) {
	case "asc":
		s.Desc = false
	case "desc":
		s.Desc = true
	default:
		s.Desc = s.Key != SortName
	}
	return s
}

// parseCollectionQuery reads the collections page's query: its order
// (parseCollectionSort) and page cursor (after or before, as pageURL
// writes them; a malformed one reads as none: the first page).
func parseCollectionQuery(q url.Values) (collectionSort, CollectionQuery) {
	s := parseCollectionSort(q)
	cq := CollectionQuery{Sort: s.Key, Desc: s.Desc, Limit: collectionsPageSize}
	if cur, ok := decodeCursor(s.Key, q.Get("before")); ok {
		cq.Before = &cur
	} else if cur, ok := decodeCursor(s.Key, q.Get("after")); ok {
		cq.After = &cur
	}
	return s, cq
}

// encodeCursor writes a page cursor of order key: the name, after the
// figure and a colon in a figure's order.
func encodeCursor(key string, c CollectionCursor) string {
	if key == SortName {
		return c.Name
	}
	return strconv.FormatInt(c.Value, 10) + ":" + c.Name
}

// decodeCursor reads encodeCursor's text; false for none or a malformed
// one.
func decodeCursor(key, s string) (CollectionCursor, bool) {
	if s == "" {
		return CollectionCursor{}, false
	}
	if key == SortName {
		return CollectionCursor{Name: s}, true
	}
	v, name, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		return CollectionCursor{}, false
	}
	return CollectionCursor{Value: n, Name: name}, true
}

// CompareCursors orders two positions as a CollectionQuery of order sort
// (a Sort constant) and desc reads them: by the figure (reversed with
// desc), ties by name ascending; by name alone (reversed with desc) for
// SortName. Names compare by their bytes. A Source's CollectionsPage must
// return this order.
func CompareCursors(a, b CollectionCursor, sort string, desc bool) int {
	if sort == SortName || sort == "" {
		c := strings.Compare(a.Name, b.Name)
		if desc {
			c = -c
		}
		return c
	}
	c := cmp.Compare(a.Value, b.Value)
	if desc {
		c = -c
	}
	return cmp.Or(c, strings.Compare(a.Name, b.Name))
}

// pageURL is the collections page in order s, after (or, with before,
// before) position cur.
func pageURL(s collectionSort, cur CollectionCursor, before bool) string {
	side := "after"
	if before {
		side = "before"
	}
	q := s.query()
	q.Set(side, encodeCursor(s.Key, cur))
	return "/collections?" + q.Encode()
}

// query is s as the collections page's query parameters.
func (s collectionSort) query() url.Values {
	dir := "asc"
	if s.Desc {
		dir = "desc"
	}
	return url.Values{"sort": {s.Key}, "dir": {dir}}
}

// buildCollections is the collections page of p, read by q in order s.
func buildCollections(now time.Time, p CollectionPage, s collectionSort, q CollectionQuery) collectionsView {
	cs := p.Collections
	v := collectionsView{Count: fmtCount(int64(p.Total))}
	back := q.Before != nil
	if n := len(cs); n > 0 {
		if back && p.More || !back && q.After != nil {
			v.PrevURL = pageURL(s, CursorOf(cs[0], s.Key), true)
		}
		if !back && p.More || back {
			v.NextURL = pageURL(s, CursorOf(cs[n-1], s.Key), false)
		}
		v.Shown = fmt.Sprintf("%s on this page", fmtCount(int64(n)))
	} else if q.After != nil || back {
		// A page past the end (the collections moved): back to the first.
		v.FirstURL = "/collections?" + s.query().Encode()
	}
	cols := []struct {
		label, key string
		numeric    bool
	}{
		{"Name", "name", false},
		{"Backlog", "backlog", true},
		{"Records", "records", true},
		{"Version", "", true},
		{"Segment size", "", true},
		{"Blocks", "", true},
		{"Versions kept", "", true},
		{"Dim", "", true},
		{"Failures", "", true},
		{"Oldest uncompacted", "", false},
		{"Last compacted", "last_compacted", false},
		{"Created", "", false},
	}
	for _, c := range cols {
		h := sortHeader{Label: c.label, Key: c.key, Numeric: c.numeric, AriaSort: "none"}
		if c.key != "" {
			dir := "asc"
			if c.key != "name" {
				dir = "desc" // figures: largest first on the first click
			}
			if c.key == s.Key {
				if s.Desc {
					h.AriaSort, h.Arrow, dir = "descending", "▼", "asc"
				} else {
					h.AriaSort, h.Arrow, dir = "ascending", "▲", "desc"
				}
			}
			h.URL = "/collections?" + url.Values{"sort": {c.key}, "dir": {dir}}.Encode()
		}
		v.Headers = append(v.Headers, h)
	}
	for _, c := range cs {
		v.Rows = append(v.Rows, newCollectionRow(now, c))
	}
	return v
}

// ---- one job, one collection ----

// fieldView is one labelled value of a detail page.
type fieldView struct {
	Key   string // data-field
	Label string
	Value string
	Hint  string // after the value, e.g. "3m ago"
	ISO   string // a time: <time datetime>
	URL   string // the value links here
	Pre   bool   // preformatted text (errors, reasons)
	Badge string // CSS class of a state badge
}

func timeField(key, label string, t timeView) fieldView {
	return fieldView{Key: key, Label: label, Value: t.Text, Hint: t.Rel, ISO: t.ISO}
}

type jobView struct {
	Job        jobRow
	Title      string
	Fields     []fieldView
	Prediction predictionView
	Running    bool
	Act        actView
	Cancel     bool
	CancelURL  string
}

// buildJob is the page of job j; capBps is the throughput cap in force
// (bytes per second, 0: none), shown on a job it throttles.
func buildJob(now time.Time, j Job, capBps int64, act actView) jobView {
	r := newJobRow(now, j, nil)
	r.Progress.throttle(capBps)
	span := dash
	if j.OffsetStart != 0 || j.OffsetEnd != 0 {
		span = "(" + fmtCount(j.OffsetStart) + ", " + fmtCount(j.OffsetEnd) + "]"
	}
	version := dash
	switch {
	case j.VersionAfter != 0:
		version = strconv.FormatInt(j.VersionBefore, 10) + " → " + strconv.FormatInt(j.VersionAfter, 10)
	case j.VersionBefore != 0:
		version = strconv.FormatInt(j.VersionBefore, 10) + " → " + dash // nothing committed (yet)
	}
	records := fmtCount(j.RecordsRead)
	if j.RecordsTotal > 0 {
		records += " of " + fmtCount(j.RecordsTotal)
	}
	bytes := fmtBytes(j.BytesWritten)
	if j.BytesWritten >= 1024 {
		bytes += " (" + fmtCount(j.BytesWritten) + " B)"
	}
	orDash := func(s string) string {
		if s == "" {
			return dash
		}
		return s
	}
	v := jobView{
		Job:       r,
		Title:     "Job " + r.ShortID,
		Running:   j.State == StateRunning,
		Act:       act,
		Cancel:    r.Cancelable,
		CancelURL: r.CancelURL,
		Fields: []fieldView{
			{Key: "id", Label: "ID", Value: j.ID},
			{Key: "state", Label: "State", Value: j.State, Badge: r.StateClass},
			{Key: "collection", Label: "Collection", Value: r.CollectionName, URL: r.CollectionURL},
			{Key: "collection_id", Label: "Collection ID", Value: j.CollectionID},
			{Key: "kind", Label: "Kind", Value: r.Kind},
			{Key: "trigger", Label: "Trigger", Value: r.Trigger},
			{Key: "triggered_by", Label: "Triggered by", Value: triggeredBy(j.TriggeredBy)},
			{Key: "reason", Label: "Reason", Value: orDash(j.Reason), Pre: j.Reason != ""},
			{Key: "attempt", Label: "Attempt", Value: r.Attempt},
			{Key: "node", Label: "Node", Value: orDash(j.Node)},
			timeField("created", "Created", r.Created),
			timeField("started", "Started", r.Started),
			timeField("finished", "Finished", r.Finished),
			{Key: "wait", Label: "Queued for", Value: r.Wait},
			{Key: "duration", Label: "Ran for", Value: r.Duration},
			{Key: "offsets", Label: "Log offsets", Value: span},
			{Key: "records_read", Label: "Records read", Value: records},
			{Key: "records_written", Label: "Records written", Value: r.RecordsWritten},
			{Key: "bytes_written", Label: "Bytes written", Value: bytes},
			{Key: "version", Label: "Segment version", Value: version},
			{Key: "note", Label: "Note", Value: orDash(j.Note)},
			{Key: "error", Label: "Error", Value: orDash(j.Error), Pre: j.Error != ""},
			{Key: "failure_class", Label: "Failure class", Value: failureClassText(j.FailureClass)},
		},
	}
	v.Prediction = buildPrediction(j)
	return v
}

// failureClassText is a failure class with what it means for the
// collection.
func failureClassText(c string) string {
	switch c {
	case "infrastructure":
		return "infrastructure: retried with backoff, not counted toward the dead-letter state"
	case "data", "internal":
		return c + ": counted toward the dead-letter state"
	}
	return dash
}

// predictionView is a job's prediction beside its actual figures.
type predictionView struct {
	Shown bool
	Rows  []predictionRow
	Basis string
}

type predictionRow struct {
	Key, Label, Predicted, Actual, Error string
}

// buildPrediction compares j's prediction with what it did (the actual
// column stays a dash until the job ends).
func buildPrediction(j Job) predictionView {
	p := j.Predicted
	if p == nil {
		return predictionView{}
	}
	done := j.State == StateSucceeded || j.State == StateFailed || j.State == StateCancelled
	a := j.Actual
	if !done {
		a = nil
	}
	row := func(key, label, pred string, predN float64, act string, actN float64, known bool) predictionRow {
		r := predictionRow{Key: key, Label: label, Predicted: pred, Actual: dash, Error: dash}
		if known {
			r.Actual = act
			if predN > 0 && j.State == StateSucceeded {
				r.Error = fmt.Sprintf("%+.0f %%", (actN/predN-1)*100)
			}
		}
		return r
	}
	dur := 0.0
	if !j.StartedAt.IsZero() && !j.FinishedAt.IsZero() {
		dur = j.FinishedAt.Sub(j.StartedAt).Seconds()
	}
	predSecs := 0.0
	if p.SecondsKnown {
		predSecs = p.Seconds
	}
	v := predictionView{Shown: true, Basis: p.Basis}
	v.Rows = append(v.Rows,
		row("duration", "Duration", predictedDuration(p), predSecs, fmtDuration(time.Duration(dur*float64(time.Second))), dur, done && dur > 0),
		row("records", "Operation records read", fmtCount(p.OpRecords), float64(p.OpRecords), fmtCount(j.RecordsRead), float64(j.RecordsRead), done),
		row("records_written", "Records written", fmtCount(p.RecordsToWrite), float64(p.RecordsToWrite), fmtCount(j.RecordsWritten), float64(j.RecordsWritten), done),
	)
	// The prediction counts every byte put, the index's included; the
	// job's own counter, blocks and manifest only.
	if a != nil && a.BytesWritten > 0 {
		v.Rows = append(v.Rows, row("bytes_written", "Bytes written", fmtBytes(p.BytesWritten), float64(p.BytesWritten), fmtBytes(a.BytesWritten), float64(a.BytesWritten), true))
	} else {
		segment := p.BytesWritten - p.IndexBytes
		v.Rows = append(v.Rows, row("bytes_written", "Bytes of blocks and manifest", fmtBytes(segment), float64(segment), fmtBytes(j.BytesWritten), float64(j.BytesWritten), done))
	}
	var ar actualFigures
	if a != nil {
		ar = actualFigures{a.BytesRead, a.BlobGets, a.BlobPuts, a.BlocksWritten, a.VectorsIndexed}
	}
	v.Rows = append(v.Rows,
		row("bytes_read", "Bytes read", fmtBytes(p.BytesRead), float64(p.BytesRead), fmtBytes(ar.read), float64(ar.read), a != nil),
		row("blob_gets", "Blob GETs", fmtCount(p.BlobGets), float64(p.BlobGets), fmtCount(ar.gets), float64(ar.gets), a != nil),
		row("blob_puts", "Blob PUTs", fmtCount(p.BlobPuts), float64(p.BlobPuts), fmtCount(ar.puts), float64(ar.puts), a != nil),
		row("blocks_written", "Blocks written", fmtCount(int64(p.BlocksToWrite)), float64(p.BlocksToWrite), fmtCount(ar.blocks), float64(ar.blocks), a != nil),
		row("vectors", "Vectors indexed", fmtCount(p.VectorsToInsert), float64(p.VectorsToInsert), fmtCount(ar.vectors), float64(ar.vectors), a != nil),
	)
	return v
}

// actualFigures holds the actual figures a job page compares (zero while
// unknown).
type actualFigures struct{ read, gets, puts, blocks, vectors int64 }

// deadLetterRow is one event of a collection's dead-letter history,
// formatted.
type deadLetterRow struct {
	At                                        timeView
	Event, Build, Failures, By, Detail, JobID string
	JobURL                                    string
}

// buildDeadLetters formats a collection's dead-letter history.
func buildDeadLetters(now time.Time, evs []DeadLetterEvent) []deadLetterRow {
	out := make([]deadLetterRow, 0, len(evs))
	for _, e := range evs {
		ev := e.Event
		if e.Cause != "" {
			ev += " (" + e.Cause + ")"
		}
		r := deadLetterRow{At: newTimeView(now, e.At), Event: ev, Build: cmpOr(e.Build, dash), Failures: strconv.Itoa(e.Failures),
			By: cmpOr(e.Actor, dash), Detail: cmpOr(e.Reason, dash), JobID: dash}
		if e.JobID != "" {
			r.JobID, r.JobURL = shortID(e.JobID), jobURL(e.JobID)
		}
		out = append(out, r)
	}
	return out
}

type collectionView struct {
	Row        collectionRow
	Title      string
	Fields     []fieldView
	Jobs       []jobRow
	Durations  chartView
	Backlog    chartView
	Throughput chartView
	Act        actView
	CompactURL string
	JobsURL    string
	Pause      pauseView
	Versions   []versionRow
	// DeadLetters is the collection's dead-letter history, newest first.
	DeadLetters []deadLetterRow
}

// versionRow is one line of a collection's version history.
type versionRow struct {
	Version   string
	Created   timeView
	Offsets   string
	Records   string
	Bytes     string
	Blocks    string
	State     string // "current", "kept", "retired"
	Badge     string // the state's CSS class
	JobURL    string // "" for a rollback
	JobShort  string
	Origin    string // "rollback to 3 by alice: …"; "" for a compaction
	Digest    string
	DigestTip string
	Verified  string
}

// versionRows builds the version history table.
func versionRows(now time.Time, vs []CollectionVersion) []versionRow {
	rows := make([]versionRow, 0, len(vs))
	for _, v := range vs {
		r := versionRow{
			Version: fmtCount(v.Version), Created: newTimeView(now, v.CreatedAt),
			Offsets: fmt.Sprintf("(%s, %s]", fmtCount(v.OffsetStart), fmtCount(v.CompactionOffset)),
			Records: fmtCount(v.RecordCount), Bytes: fmtBytes(v.SegmentBytes), Blocks: fmtCount(int64(v.BlockCount)),
			State: "retired", Badge: "state-cancelled", Digest: dash, Verified: "unknown",
		}
		if v.OffsetStart < 0 {
			r.Offsets = "… " + fmtCount(v.CompactionOffset) + "]"
		}
		switch {
		case v.Current:
			r.State, r.Badge = "current", "state-succeeded"
		case v.Kept:
			r.State, r.Badge = "kept", "state-queued"
		}
		if v.JobID != "" {
			r.JobURL, r.JobShort = jobURL(v.JobID), shortID(v.JobID)
		}
		if v.RollbackOf > 0 {
			r.Origin = fmt.Sprintf("rollback to %d", v.RollbackOf)
			if v.CreatedBy != "" {
				r.Origin += " by " + v.CreatedBy
			}
			if v.Reason != "" {
				r.Origin += ": " + v.Reason
			}
		}
		if v.Digest != "" {
			r.Digest, r.DigestTip = truncate(v.Digest, 12), v.Digest
		}
		if v.Verification != "" {
			r.Verified = v.Verification
		}
		rows = append(rows, r)
	}
	return rows
}

const collectionJobsShown = 100

func buildCollection(now time.Time, c Collection, jobs []Job, history []Point, act actView) collectionView {
	row := newCollectionRow(now, c)
	dead := "no"
	if c.DeadLettered {
		dead = "yes, since " + newTimeView(now, c.DeadLetteredAt).Text
	}
	names := map[string]string{c.ID: c.Name}
	v := collectionView{
		Row:        row,
		Title:      c.Name,
		Act:        act,
		CompactURL: collectionURL(c.ID) + "/compact",
		Pause:      newPauseView(now, c.Paused, c.PauseReason, c.PausedBy, c.PausedAt, collectionURL(c.ID)),
		JobsURL:    "/?" + url.Values{"collection": {c.ID}, "state": {"all"}}.Encode() + "#history",
		Fields: []fieldView{
			{Key: "id", Label: "ID", Value: c.ID},
			{Key: "name", Label: "Name", Value: c.Name},
			{Key: "dimension", Label: "Dimension", Value: row.Dimension},
			{Key: "backlog", Label: "Backlog", Value: row.Backlog + " records"},
			timeField("oldest_uncompacted", "Oldest uncompacted", row.Oldest),
			{Key: "records", Label: "Records", Value: row.Records},
			{Key: "version", Label: "Segment version", Value: row.Version},
			{Key: "segment_bytes", Label: "Segment size", Value: row.SegmentBytes},
			{Key: "blocks", Label: "Blocks", Value: row.Blocks},
			{Key: "versions_kept", Label: "Versions kept", Value: row.VersionsKept},
			{Key: "log_position", Label: "Log position", Value: row.LogPosition},
			{Key: "compaction_offset", Label: "Compaction offset", Value: row.CompactionOffset},
			{Key: "failures", Label: "Consecutive failures", Value: row.Failures},
			{Key: "dead_lettered", Label: "Dead-lettered", Value: dead},
			{Key: "automatic", Label: "Automatic compaction", Value: newPauseView(now, c.Paused, c.PauseReason, c.PausedBy, c.PausedAt, "").Text},
			{Key: "min_compaction_size", Label: "Min compaction size", Value: overrideText(c.MinCompactionSize > 0, fmtCount(c.MinCompactionSize)+" records")},
			{Key: "max_uncompacted_age", Label: "Max uncompacted age", Value: overrideText(c.MaxUncompactedAge > 0, c.MaxUncompactedAge.String())},
			{Key: "priority", Label: "Priority", Value: cmp.Or(c.Priority, "normal")},
			{Key: "windows", Label: "Compaction windows", Value: overrideText(len(c.Windows) > 0, strings.Join(c.Windows, "; "))},
			{Key: "objectives", Label: "Freshness objectives", Value: objectivesText(c)},
			{Key: "throughput_share", Label: "Throughput share", Value: shareText(c.ThroughputShare)},
			{Key: "freshness_debt", Label: "Freshness debt", Value: debtText(c.FreshnessDebt)},
			timeField("last_compacted", "Last compacted", row.LastCompacted),
			timeField("created", "Created", row.Created),
		},
		Jobs:       jobRows(now, jobs, names),
		Durations:  durationChart(jobs),
		Backlog:    backlogChart(history),
		Throughput: throughputChart(now, jobs),
	}
	v.Fields = append(v.Fields, indexFields(now, c.Index)...)
	v.Versions = versionRows(now, c.Versions)
	return v
}

// indexFields are the collection page's lines about the vector index.
func indexFields(now time.Time, ix CollectionIndex) []fieldView {
	if ix.Disabled {
		return []fieldView{{Key: "index", Label: "Vector index", Value: "off (every query scans)"}}
	}
	params := fmt.Sprintf("HNSW, %s, M %d, ef_construction %d, ef_search %d", ix.Distance, ix.M, ix.EfConstruction, ix.EfSearch)
	if !ix.Built {
		return []fieldView{{Key: "index", Label: "Vector index", Value: params, Hint: "not built yet: the next compaction builds it"}}
	}
	tomb := "0"
	if in := ix.Vectors + ix.Tombstones; in > 0 {
		tomb = fmt.Sprintf("%s (%.1f %%)", fmtCount(int64(ix.Tombstones)), 100*float64(ix.Tombstones)/float64(in))
	}
	built := newTimeView(now, ix.BuiltAt)
	return []fieldView{
		{Key: "index", Label: "Vector index", Value: params},
		{Key: "index_vectors", Label: "Index vectors", Value: fmtCount(int64(ix.Vectors))},
		{Key: "index_tombstones", Label: "Index tombstones", Value: tomb},
		{Key: "index_bytes", Label: "Index size", Value: fmtBytes(ix.Bytes)},
		{Key: "index_build", Label: "Index last build", Value: fmt.Sprintf("%s, %.2f s", ix.Build, ix.BuildSeconds), Hint: built.Rel, ISO: built.ISO},
	}
}

// ---- login and errors ----

type loginView struct {
	Next   string
	Notice string // why sign-in is asked for
	Error  string // a refused token
}

type errorView struct {
	Status  string
	Title   string
	Message string
}

// overrideText is v when a collection overrides a server threshold.
func overrideText(set bool, v string) string {
	if !set {
		return "the server's"
	}
	return v
}

// ---- plan ----

// atRiskDebt is the freshness debt from which a collection is shown at risk
// (the manager's AtRiskDebt).
const atRiskDebt = 0.8

// debtText is a freshness debt with two decimals, "-" for none.
func debtText(d float64) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(d, 'f', 2, 64)
}

// windowText is a plan entry's compaction window in words.
func windowText(now time.Time, e PlanEntry) string {
	switch {
	case len(e.Windows) == 0:
		return "any time"
	case e.WindowOpen && e.NextWindowEnd.IsZero():
		// Windows that together stay open all week never close.
		return "open, never closes"
	case e.WindowOpen:
		return "open until " + fmtWhen(now, e.NextWindowEnd)
	case e.NextWindowEnd.IsZero():
		return "from " + fmtWhen(now, e.NextWindowStart) + ", never closes"
	}
	return fmtWhen(now, e.NextWindowStart) + " to " + fmtWhen(now, e.NextWindowEnd)
}

// fmtWhen is an absolute UTC time, with the date when it is not today's.
func fmtWhen(now, t time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04 UTC")
	}
	return t.Format("Mon 2 Jan 15:04 UTC")
}

// shareText is a collection's throughput share in words.
func shareText(f float64) string {
	if f <= 0 {
		return "none"
	}
	return strconv.FormatFloat(f*100, 'f', -1, 64) + " % of the throughput cap while others write"
}

// objectivesText lists a collection's freshness objectives.
func objectivesText(c Collection) string {
	var parts []string
	if c.ObjectiveMaxAge > 0 {
		parts = append(parts, "oldest record at most "+c.ObjectiveMaxAge.String())
	}
	if c.ObjectiveMaxBacklog > 0 {
		parts = append(parts, "at most "+fmtCount(c.ObjectiveMaxBacklog)+" records")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

type planView struct {
	Pause     pauseView
	Act       actView
	Planned   []planRow
	Skipped   []planRow
	Estimated bool // the planned rows carry priced estimates
	Priced    []priceRow
	Total     priceRow // the sums of Priced
	Basis     string   // where the durations come from (the first estimate's)
}

type planRow struct {
	CollectionName string
	CollectionURL  string
	Decision       string // "run", "paused", ...
	Reason         string
	Backlog        string
	Priority       string
	Debt           string // "0.85", or "-" without objectives
	AtRisk         bool
	Window         string // "any time", "open until …", "… to …"
}

// priceRow is one priced job of the plan (or their totals), formatted.
type priceRow struct {
	CollectionName, CollectionURL         string
	Records, Rewrite, Read, Write         string
	Gets, Puts, WriteAmp, Index, Duration string
	Window, Error                         string
}

// newPriceRow formats estimate p.
func newPriceRow(name, url string, p *jobtype.Prediction) priceRow {
	rewrite := fmtCount(int64(p.BlocksToRewrite)) + " of " + fmtCount(int64(p.BlocksTotal))
	if p.Delta {
		rewrite = "a delta"
	}
	return priceRow{CollectionName: name, CollectionURL: url, Records: fmtCount(p.OpRecords), Rewrite: rewrite,
		Read: fmtBytes(p.BytesRead), Write: fmtBytes(p.BytesWritten), Gets: fmtCount(p.BlobGets), Puts: fmtCount(p.BlobPuts),
		WriteAmp: strconv.FormatFloat(p.WriteAmplification, 'f', 2, 64), Index: indexWork(p), Duration: predictedDuration(p),
		Window: cmpOr(p.Window, dash)}
}

// indexWork is an estimate's index phase in words.
func indexWork(p *jobtype.Prediction) string {
	if !p.Indexed {
		return "off"
	}
	t := "+" + fmtCount(p.VectorsToInsert) + " / −" + fmtCount(p.VectorsToDelete)
	if p.IndexFullBuild {
		t += ", full rebuild"
	}
	return t
}

// predictedDuration is an estimate's predicted duration, "unknown" before
// the node has measured anything.
func predictedDuration(p *jobtype.Prediction) string {
	if !p.SecondsKnown {
		return "unknown"
	}
	return fmtDuration(time.Duration(p.Seconds * float64(time.Second)))
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// totalPriceRow is the row of a plan's totals.
func totalPriceRow(t jobtype.PlanTotals) priceRow {
	dur := fmtDuration(time.Duration(t.Seconds * float64(time.Second)))
	if t.SecondsUnknown > 0 {
		dur += " + " + strconv.Itoa(t.SecondsUnknown) + " unknown"
	}
	return priceRow{CollectionName: strconv.Itoa(t.Jobs) + " jobs", Records: fmtCount(t.OpRecords),
		Rewrite: fmtCount(t.BlocksToRewrite) + " of " + fmtCount(t.BlocksTotal), Read: fmtBytes(t.BytesRead), Write: fmtBytes(t.BytesWritten),
		Gets: fmtCount(t.BlobGets), Puts: fmtCount(t.BlobPuts), WriteAmp: strconv.FormatFloat(t.WriteAmplification, 'f', 2, 64),
		Index: "+" + fmtCount(t.VectorsToInsert) + " / −" + fmtCount(t.VectorsToDelete), Duration: dur, Window: dash}
}

func buildPlan(now time.Time, c Controls, entries []PlanEntry, act actView) planView {
	v := planView{Pause: newPauseView(now, c.Paused, c.Reason, c.By, c.Since, ""), Act: act}
	var total jobtype.PlanTotals
	for _, e := range entries {
		name := e.CollectionName
		if name == "" {
			name = e.CollectionID
		}
		row := planRow{CollectionName: name, CollectionURL: collectionURL(e.CollectionID), Decision: e.Decision, Reason: e.Reason, Backlog: fmtCount(e.Backlog),
			Priority: cmp.Or(e.Priority, "normal"), Debt: debtText(e.FreshnessDebt), AtRisk: e.FreshnessDebt >= atRiskDebt,
			Window: windowText(now, e)}
		switch e.Decision {
		case "run":
			v.Planned = append(v.Planned, row)
			switch {
			case e.Estimate != nil:
				v.Priced = append(v.Priced, newPriceRow(name, row.CollectionURL, e.Estimate))
				total.Add(e.Estimate)
				if v.Basis == "" {
					v.Basis = e.Estimate.Basis
				}
			case e.EstimateError != "":
				v.Priced = append(v.Priced, priceRow{CollectionName: name, CollectionURL: row.CollectionURL, Error: e.EstimateError})
			}
		case "empty":
		default:
			v.Skipped = append(v.Skipped, row)
		}
	}
	v.Total = totalPriceRow(total)
	return v
}

// triggeredBy shows who asked for a job; the scheduler's jobs name no one.
func triggeredBy(by string) string {
	if by == "" {
		return "the scheduler"
	}
	return by
}
