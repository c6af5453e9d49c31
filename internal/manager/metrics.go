package manager

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/metric"
)

// metrics are the manager's Prometheus metrics (DESIGN.md §8). Labels are
// bounded: trigger, outcome and state take a handful of values, all created
// at zero.
type metrics struct {
	jobs           *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	queueWait      prometheus.Histogram
	states         *prometheus.GaugeVec
	compacted      prometheus.Counter
	logRead        prometheus.Counter
	bytesWritten   prometheus.Counter
	backlogs       backlogs // compactor_uncompacted_records, compactor_collections_dead_lettered
	lastSuccess    prometheus.Gauge
	schedulerRuns  prometheus.Counter
	schedulerEvery prometheus.Gauge
	running        prometheus.Gauge // compactor_jobs{state="running"}: this node's
	leader         prometheus.Gauge
	nodes          prometheus.Gauge

	schedulerPaused   prometheus.Gauge
	collectionsPaused prometheus.Gauge
	maxThroughput     prometheus.Gauge
	freshness         *freshnessGauges

	// failures counts FAILED jobs by class; predictionError observes
	// actual/predicted - 1 of successful jobs by figure.
	failures        *prometheus.CounterVec
	predictionError *prometheus.HistogramVec
	redrives        *prometheus.CounterVec
}

var (
	triggers = []catalog.Trigger{catalog.TriggerScheduled, catalog.TriggerOneOff}
	outcomes = []catalog.JobState{catalog.JobSucceeded, catalog.JobFailed, catalog.JobCancelled}
)

func newMetrics(reg prometheus.Registerer, cfg Config) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		jobs:         metric.CounterVec(f, "compactor_jobs_total", "Compaction jobs finished, by trigger and outcome.", "trigger", "outcome"),
		duration:     metric.HistogramVec(f, "compactor_job_duration_seconds", "Time from start to end of compaction jobs, by outcome.", prometheus.ExponentialBuckets(0.01, 4, 10), "outcome"), // 10 ms .. ~44 min
		queueWait:    metric.Histogram(f, "compactor_job_queue_wait_seconds", "Time compaction jobs waited in the queue before they started.", prometheus.ExponentialBuckets(0.01, 4, 10)),
		states:       metric.GaugeVec(f, "compactor_jobs", "Compaction jobs queued (in the whole catalog, as of the last status poll) or running (on this node).", "state"),
		compacted:    metric.Counter(f, "compactor_records_compacted_total", "Log records materialized into committed segment versions."),
		logRead:      metric.Counter(f, "compactor_log_records_read_total", "Log records read by compaction jobs, whatever their outcome."),
		bytesWritten: metric.Counter(f, "compactor_segment_bytes_written_total", "Bytes of segment blocks and manifests written by compaction jobs, whatever their outcome."),
		backlogs: backlogs{
			backlog: metric.Gauge(f, "compactor_uncompacted_records", "Log records not yet compacted, summed over collections; updated on push, at the end of every job and at every scheduler run."),
			dead:    metric.Gauge(f, "compactor_collections_dead_lettered", "Collections the scheduler skips after repeated failures; updated at the end of every job and at every scheduler run."),
			byID:    make(map[string]collBacklog),
		},
		lastSuccess:       metric.Gauge(f, "compactor_last_successful_compaction_timestamp_seconds", "Unix time of the end of the last successful compaction job; 0 if none since start."),
		schedulerRuns:     metric.Counter(f, "compactor_scheduler_runs_total", "Scheduler runs."),
		schedulerEvery:    metric.Gauge(f, "compactor_scheduler_interval_seconds", "Configured time between scheduler runs."),
		leader:            metric.Gauge(f, "compactor_scheduler_leader", "1 while this node holds the scheduler's leader lease, 0 otherwise."),
		nodes:             metric.Gauge(f, "compactor_nodes_alive", "Replicas whose heartbeat is recent, as of the last listing of nodes."),
		schedulerPaused:   metric.Gauge(f, "compactor_scheduler_paused", "1 while automatic compaction is paused on every collection, as of the last scheduler run or pause."),
		maxThroughput:     metric.Gauge(f, "compactor_compaction_max_throughput_bytes", "Cap on bytes per second written by this node's compactions; 0: no cap."),
		collectionsPaused: metric.Gauge(f, "compactor_collections_paused", "Collections whose automatic compaction is paused, as of the last scheduler run."),
	}
	m.freshness = newFreshnessGauges(f)
	m.failures = metric.CounterVec(f, "compactor_job_failures_total", "Failed compaction jobs by class: infrastructure (retried with backoff, never dead-letters), data (corrupt or invalid stored data) or internal (a bug, a recovered panic, an unclassified error); data and internal count toward the dead-letter state, but for a verify job's data failure, which queues a repair.", "class")
	for _, c := range []jobtype.FailureClass{jobtype.FailureInfrastructure, jobtype.FailureData, jobtype.FailureInternal} {
		m.failures.WithLabelValues(string(c))
	}
	m.predictionError = metric.HistogramVec(f, "compactor_plan_prediction_error_ratio", "Relative error of successful jobs' predictions (made when claimed), actual/predicted - 1, by figure: duration, bytes_written, blob_puts. 0 is exact, -0.5 half the prediction, 1 twice it.", []float64{-0.9, -0.5, -0.25, -0.1, -0.05, 0, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 9}, "figure")
	for _, fig := range []string{"duration", "bytes_written", "blob_puts"} {
		m.predictionError.WithLabelValues(fig)
	}
	m.redrives = metric.CounterVec(f, "compactor_dead_letter_redrives_total", "Jobs of dead-lettered collections queued by the scheduler, by cause: cool-off (once, after --dead-letter-cooloff) or upgrade (once per server build other than the one that dead-lettered it).", "cause")
	for _, c := range []string{catalog.RedriveCoolOff, catalog.RedriveUpgrade} {
		m.redrives.WithLabelValues(c)
	}
	m.running = m.states.WithLabelValues(label(catalog.JobRunning))
	for _, t := range triggers {
		for _, o := range outcomes {
			m.jobs.WithLabelValues(label(t), label(o))
		}
	}
	for _, o := range outcomes {
		m.duration.WithLabelValues(label(o))
	}
	m.states.WithLabelValues(label(catalog.JobQueued))
	m.states.WithLabelValues(label(catalog.JobRunning))
	m.schedulerEvery.Set(cfg.Interval.Seconds())
	m.maxThroughput.Set(float64(cfg.MaxThroughput))
	return m
}

func label[T ~string](v T) string { return strings.ToLower(string(v)) }

// finished accounts a job that reached a terminal state.
func (m *metrics) finished(j catalog.Job, _ error) {
	m.jobs.WithLabelValues(label(j.Trigger), label(j.State)).Inc()
	if !j.StartedAt.IsZero() {
		m.duration.WithLabelValues(label(j.State)).Observe(j.FinishedAt.Sub(j.StartedAt).Seconds())
	}
	m.logRead.Add(float64(j.RecordsRead))
	m.bytesWritten.Add(float64(j.BytesWritten))
	if j.State == catalog.JobFailed && j.FailureClass != "" {
		m.failures.WithLabelValues(string(j.FailureClass)).Inc()
	}
	if j.State == catalog.JobSucceeded {
		m.observePrediction(j)
		if j.VersionAfter != j.VersionBefore {
			m.compacted.Add(float64(j.RecordsRead))
		}
		m.lastSuccess.Set(float64(j.FinishedAt.UnixMilli()) / 1e3)
	}
}

// backlogs keeps the backlog gauges current between scheduler runs: it holds
// the last known log position, compaction offset and dead-letter state of
// every collection (in memory, one entry per collection: the gauges carry no
// collection label), and the gauges are their sums. A push or the end of a
// job updates one collection (update), a scheduler run replaces them all
// (replace), a deleted collection drops out (drop).
//
// Another replica's pushes and commits reach these figures at this replica's
// next scheduler run.
type backlogs struct {
	backlog, dead prometheus.Gauge

	mu         sync.Mutex
	byID       map[string]collBacklog
	sum, nDead int64
}

type collBacklog struct {
	logPosition, compactionOffset int64
	dead                          bool
}

func (b collBacklog) records() int64 { return max(0, b.logPosition-b.compactionOffset) }

func (b *backlogs) replace(colls []catalog.Collection) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.byID)
	b.sum, b.nDead = 0, 0
	for _, c := range colls {
		b.putLocked(c)
	}
	b.setLocked()
}

// update sets one collection's figures, unless they are older than the ones
// held: log position and compaction offset only grow, so a read that lost a
// race with a newer one is ignored.
func (b *backlogs) update(c catalog.Collection) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byID[c.ID]; ok && (c.LogPosition < old.logPosition || c.CompactionOffset < old.compactionOffset) {
		return
	}
	b.replaceLocked(c)
}

// set sets one collection's figures as read, even when its compaction
// offset moved back (a rollback).
func (b *backlogs) set(c catalog.Collection) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.replaceLocked(c)
}

func (b *backlogs) replaceLocked(c catalog.Collection) {
	if old, ok := b.byID[c.ID]; ok {
		b.removeLocked(c.ID, old)
	}
	b.putLocked(c)
	b.setLocked()
}

func (b *backlogs) drop(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.byID[id]; ok {
		b.removeLocked(id, old)
		b.setLocked()
	}
}

func (b *backlogs) putLocked(c catalog.Collection) {
	e := collBacklog{logPosition: c.LogPosition, compactionOffset: c.CompactionOffset, dead: c.DeadLettered()}
	b.byID[c.ID] = e
	b.sum += e.records()
	if e.dead {
		b.nDead++
	}
}

func (b *backlogs) removeLocked(id string, old collBacklog) {
	delete(b.byID, id)
	b.sum -= old.records()
	if old.dead {
		b.nDead--
	}
}

func (b *backlogs) setLocked() {
	b.backlog.Set(float64(b.sum))
	b.dead.Set(float64(b.nDead))
}
