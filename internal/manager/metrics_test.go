package manager

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
)

// t0 is the fixed time every job in these tests is measured from:
// 2026-03-01T12:00:00Z, Unix 1772366400.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func metricsConfig() Config {
	c := DefaultConfig()
	c.Interval = 15 * time.Second
	return c
}

// durationBuckets is the bucket list of both duration histograms, as the
// text exposition writes it.
var durationBuckets = []string{"0.01", "0.04", "0.16", "0.64", "2.56", "10.24", "40.96", "163.84", "655.36", "2621.44"}

// histogram renders the expected text of one histogram series with the
// given cumulative counts per bucket (then +Inf = count).
func histogram(name, labels string, cumulative []int, sum string, count int) string {
	var b strings.Builder
	sep := ""
	if labels != "" {
		sep = ","
	}
	for i, le := range durationBuckets {
		b.WriteString(name + "_bucket{" + labels + sep + `le="` + le + `"} ` + strconv.Itoa(cumulative[i]) + "\n")
	}
	b.WriteString(name + "_bucket{" + labels + sep + `le="+Inf"} ` + strconv.Itoa(count) + "\n")
	if labels != "" {
		labels = "{" + labels + "}"
	}
	b.WriteString(name + "_sum" + labels + " " + sum + "\n")
	b.WriteString(name + "_count" + labels + " " + strconv.Itoa(count) + "\n")
	return b.String()
}

var zeroBuckets = make([]int, 10)

func TestNewMetricsExposesEveryKnownSeriesAtZeroAndTheConfiguredInterval(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg, metricsConfig())

	expected := `
# HELP compactor_jobs_total Compaction jobs finished, by trigger and outcome.
# TYPE compactor_jobs_total counter
compactor_jobs_total{outcome="cancelled",trigger="one_off"} 0
compactor_jobs_total{outcome="cancelled",trigger="scheduled"} 0
compactor_jobs_total{outcome="failed",trigger="one_off"} 0
compactor_jobs_total{outcome="failed",trigger="scheduled"} 0
compactor_jobs_total{outcome="succeeded",trigger="one_off"} 0
compactor_jobs_total{outcome="succeeded",trigger="scheduled"} 0
# HELP compactor_jobs Compaction jobs queued (in the whole catalog, as of the last status poll) or running (on this node).
# TYPE compactor_jobs gauge
compactor_jobs{state="queued"} 0
compactor_jobs{state="running"} 0
# HELP compactor_job_duration_seconds Time from start to end of compaction jobs, by outcome.
# TYPE compactor_job_duration_seconds histogram
` + histogram("compactor_job_duration_seconds", `outcome="cancelled"`, zeroBuckets, "0", 0) +
		histogram("compactor_job_duration_seconds", `outcome="failed"`, zeroBuckets, "0", 0) +
		histogram("compactor_job_duration_seconds", `outcome="succeeded"`, zeroBuckets, "0", 0) + `
# HELP compactor_job_queue_wait_seconds Time compaction jobs waited in the queue before they started.
# TYPE compactor_job_queue_wait_seconds histogram
` + histogram("compactor_job_queue_wait_seconds", "", zeroBuckets, "0", 0) + `
# HELP compactor_nodes_alive Replicas whose heartbeat is recent, as of the last listing of nodes.
# TYPE compactor_nodes_alive gauge
compactor_nodes_alive 0
# HELP compactor_compaction_max_throughput_bytes Cap on bytes per second written by this node's compactions; 0: no cap.
# TYPE compactor_compaction_max_throughput_bytes gauge
compactor_compaction_max_throughput_bytes 0
# HELP compactor_scheduler_paused 1 while automatic compaction is paused on every collection, as of the last scheduler run or pause.
# TYPE compactor_scheduler_paused gauge
compactor_scheduler_paused 0
# HELP compactor_collections_paused Collections whose automatic compaction is paused, as of the last scheduler run.
# TYPE compactor_collections_paused gauge
compactor_collections_paused 0
# HELP compactor_collections_at_risk Collections whose freshness debt is at least 0.8 (at risk of breaking, or breaking, an objective), as of the last scheduler run.
# TYPE compactor_collections_at_risk gauge
compactor_collections_at_risk 0
# HELP compactor_scheduler_leader 1 while this node holds the scheduler's leader lease, 0 otherwise.
# TYPE compactor_scheduler_leader gauge
compactor_scheduler_leader 0
# HELP compactor_records_compacted_total Log records materialized into committed segment versions.
# TYPE compactor_records_compacted_total counter
compactor_records_compacted_total 0
# HELP compactor_log_records_read_total Log records read by compaction jobs, whatever their outcome.
# TYPE compactor_log_records_read_total counter
compactor_log_records_read_total 0
# HELP compactor_segment_bytes_written_total Bytes of segment blocks and manifests written by compaction jobs, whatever their outcome.
# TYPE compactor_segment_bytes_written_total counter
compactor_segment_bytes_written_total 0
# HELP compactor_uncompacted_records Log records not yet compacted, summed over collections; updated on push, at the end of every job and at every scheduler run.
# TYPE compactor_uncompacted_records gauge
compactor_uncompacted_records 0
# HELP compactor_collections_dead_lettered Collections the scheduler skips after repeated failures; updated at the end of every job and at every scheduler run.
# TYPE compactor_collections_dead_lettered gauge
compactor_collections_dead_lettered 0
# HELP compactor_last_successful_compaction_timestamp_seconds Unix time of the end of the last successful compaction job; 0 if none since start.
# TYPE compactor_last_successful_compaction_timestamp_seconds gauge
compactor_last_successful_compaction_timestamp_seconds 0
# HELP compactor_scheduler_runs_total Scheduler runs.
# TYPE compactor_scheduler_runs_total counter
compactor_scheduler_runs_total 0
# HELP compactor_scheduler_interval_seconds Configured time between scheduler runs.
# TYPE compactor_scheduler_interval_seconds gauge
compactor_scheduler_interval_seconds 15
# HELP compactor_dead_letter_redrives_total Jobs of dead-lettered collections queued by the scheduler, by cause: cool-off (once, after --dead-letter-cooloff) or upgrade (once per server build other than the one that dead-lettered it).
# TYPE compactor_dead_letter_redrives_total counter
compactor_dead_letter_redrives_total{cause="cool-off"} 0
compactor_dead_letter_redrives_total{cause="upgrade"} 0
# HELP compactor_job_failures_total Failed compaction jobs by class: infrastructure (retried with backoff, never dead-letters), data (corrupt or invalid stored data) or internal (a bug, a recovered panic, an unclassified error); data and internal count toward the dead-letter state, but for a verify job's data failure, which queues a repair.
# TYPE compactor_job_failures_total counter
compactor_job_failures_total{class="data"} 0
compactor_job_failures_total{class="infrastructure"} 0
compactor_job_failures_total{class="internal"} 0
# HELP compactor_plan_prediction_error_ratio Relative error of successful jobs' predictions (made when claimed), actual/predicted - 1, by figure: duration, bytes_written, blob_puts. 0 is exact, -0.5 half the prediction, 1 twice it.
# TYPE compactor_plan_prediction_error_ratio histogram
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="-0.9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="-0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="-0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="-0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="-0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="0"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="2"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="4"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="blob_puts",le="+Inf"} 0
compactor_plan_prediction_error_ratio_sum{figure="blob_puts"} 0
compactor_plan_prediction_error_ratio_count{figure="blob_puts"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="-0.9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="-0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="-0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="-0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="-0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="0"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="2"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="4"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="bytes_written",le="+Inf"} 0
compactor_plan_prediction_error_ratio_sum{figure="bytes_written"} 0
compactor_plan_prediction_error_ratio_count{figure="bytes_written"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="-0.9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="-0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="-0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="-0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="-0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="0"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="0.05"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="0.1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="0.25"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="0.5"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="1"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="2"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="4"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="9"} 0
compactor_plan_prediction_error_ratio_bucket{figure="duration",le="+Inf"} 0
compactor_plan_prediction_error_ratio_sum{figure="duration"} 0
compactor_plan_prediction_error_ratio_count{figure="duration"} 0
`
	// No names: every metric the manager registers must be listed above.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected)); err != nil {
		t.Error(err)
	}
	lint(t, reg)
}

func TestFinishedCountsByTriggerAndOutcomeTimesStartedJobsAndMovesLastSuccessOnlyOnSuccess(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, metricsConfig())

	jobs := []catalog.Job{
		{ // A scheduled job that committed a new version: 1.5 s.
			ID: "j1", Trigger: catalog.TriggerScheduled, State: catalog.JobSucceeded,
			CreatedAt: t0, StartedAt: t0, FinishedAt: t0.Add(1500 * time.Millisecond),
			RecordsRead: 100, BytesWritten: 4096, VersionBefore: 1, VersionAfter: 2,
		},
		{ // A one-off with nothing to compact: no new version, 20 ms; the
			// latest success, with a millisecond part.
			ID: "j2", Trigger: catalog.TriggerOneOff, State: catalog.JobSucceeded,
			CreatedAt: t0.Add(10 * time.Minute), StartedAt: t0.Add(10*time.Minute + 230*time.Millisecond),
			FinishedAt:    t0.Add(10*time.Minute + 250*time.Millisecond),
			VersionBefore: 2, VersionAfter: 2, Note: "nothing to compact",
		},
		{ // A scheduled job that failed after reading and writing: 30 s,
			// finishing after the last success.
			ID: "j3", Trigger: catalog.TriggerScheduled, State: catalog.JobFailed,
			CreatedAt: t0.Add(20 * time.Minute), StartedAt: t0.Add(20 * time.Minute),
			FinishedAt:  t0.Add(20*time.Minute + 30*time.Second),
			RecordsRead: 50, BytesWritten: 1000, VersionBefore: 2, VersionAfter: 2, Error: "write block: disk full",
		},
		{ // A one-off cancelled while queued: it never started, so no duration.
			ID: "j4", Trigger: catalog.TriggerOneOff, State: catalog.JobCancelled,
			CreatedAt: t0.Add(21 * time.Minute), FinishedAt: t0.Add(22 * time.Minute),
		},
		{ // A one-off cancelled while running: 200 ms.
			ID: "j5", Trigger: catalog.TriggerOneOff, State: catalog.JobCancelled,
			CreatedAt: t0.Add(23 * time.Minute), StartedAt: t0.Add(23 * time.Minute),
			FinishedAt: t0.Add(23*time.Minute + 200*time.Millisecond), RecordsRead: 7,
		},
	}
	for _, j := range jobs {
		m.finished(j, nil)
	}

	// Buckets: 0.01 0.04 0.16 0.64 2.56 10.24 40.96 163.84 655.36 2621.44
	expected := `
# HELP compactor_jobs_total Compaction jobs finished, by trigger and outcome.
# TYPE compactor_jobs_total counter
compactor_jobs_total{outcome="cancelled",trigger="one_off"} 2
compactor_jobs_total{outcome="cancelled",trigger="scheduled"} 0
compactor_jobs_total{outcome="failed",trigger="one_off"} 0
compactor_jobs_total{outcome="failed",trigger="scheduled"} 1
compactor_jobs_total{outcome="succeeded",trigger="one_off"} 1
compactor_jobs_total{outcome="succeeded",trigger="scheduled"} 1
# HELP compactor_job_duration_seconds Time from start to end of compaction jobs, by outcome.
# TYPE compactor_job_duration_seconds histogram
` + histogram("compactor_job_duration_seconds", `outcome="cancelled"`, []int{0, 0, 0, 1, 1, 1, 1, 1, 1, 1}, "0.2", 1) +
		histogram("compactor_job_duration_seconds", `outcome="failed"`, []int{0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, "30", 1) +
		histogram("compactor_job_duration_seconds", `outcome="succeeded"`, []int{0, 1, 1, 1, 2, 2, 2, 2, 2, 2}, "1.52", 2) + `
# HELP compactor_records_compacted_total Log records materialized into committed segment versions.
# TYPE compactor_records_compacted_total counter
compactor_records_compacted_total 100
# HELP compactor_log_records_read_total Log records read by compaction jobs, whatever their outcome.
# TYPE compactor_log_records_read_total counter
compactor_log_records_read_total 157
# HELP compactor_segment_bytes_written_total Bytes of segment blocks and manifests written by compaction jobs, whatever their outcome.
# TYPE compactor_segment_bytes_written_total counter
compactor_segment_bytes_written_total 5096
# HELP compactor_last_successful_compaction_timestamp_seconds Unix time of the end of the last successful compaction job; 0 if none since start.
# TYPE compactor_last_successful_compaction_timestamp_seconds gauge
compactor_last_successful_compaction_timestamp_seconds 1.77236700025e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"compactor_jobs_total",
		"compactor_job_duration_seconds",
		"compactor_records_compacted_total",
		"compactor_log_records_read_total",
		"compactor_segment_bytes_written_total",
		"compactor_last_successful_compaction_timestamp_seconds",
	); err != nil {
		t.Error(err)
	}
	lint(t, reg)
}

// lint fails the test on any problem promlint finds in what reg exposes.
func lint(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
