package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
)

// Prediction is an Estimate priced in time (jobtype.Prediction).
type Prediction = jobtype.Prediction

// Rates are the throughput a node has measured over its recent successful
// jobs, which predictions are priced with.
type Rates struct {
	// BytesPerSecond: bytes written per second of the jobs' time outside
	// their index phase; VectorsPerSecond: vectors indexed per second of
	// their index phase. 0 when not measured.
	BytesPerSecond, VectorsPerSecond float64
	Jobs                             int // the jobs measured
}

// Prediction settings: the recent successful jobs of this node a
// measurement uses, and how far back it looks for them.
const (
	rateJobs     = 20
	rateJobsScan = 200
)

// rateSample is one successful job's throughput figures: bytes written in
// the seconds outside its index phase, vectors indexed in its index phase.
type rateSample struct {
	bytes     int64
	writeSecs float64
	vectors   int64
	indexSecs float64
}

// sampleOf is j's rate sample, and whether it has one: a successful job
// of node that wrote bytes, recorded its actual figures and spent time
// outside its index phase.
func sampleOf(j catalog.Job, node string) (rateSample, bool) {
	if j.State != catalog.JobSucceeded || j.Node != node || j.Actual == nil || j.BytesWritten <= 0 || j.StartedAt.IsZero() {
		return rateSample{}, false
	}
	w := j.FinishedAt.Sub(j.StartedAt).Seconds() - j.Actual.IndexSeconds
	if w <= 0 {
		return rateSample{}, false
	}
	s := rateSample{bytes: j.BytesWritten, writeSecs: w}
	if j.Actual.VectorsIndexed > 0 && j.Actual.IndexSeconds > 0 {
		s.vectors, s.indexSecs = j.Actual.VectorsIndexed, j.Actual.IndexSeconds
	}
	return s, true
}

// ratesOf sums samples into Rates.
func ratesOf(samples []rateSample) Rates {
	var r Rates
	var bytes, vectors int64
	var writeSecs, indexSecs float64
	for _, s := range samples {
		r.Jobs++
		bytes += s.bytes
		writeSecs += s.writeSecs
		vectors += s.vectors
		indexSecs += s.indexSecs
	}
	if writeSecs > 0 {
		r.BytesPerSecond = float64(bytes) / writeSecs
	}
	if indexSecs > 0 {
		r.VectorsPerSecond = float64(vectors) / indexSecs
	}
	return r
}

// rateWindow keeps the rate samples of this node's last rateJobs
// successful jobs in memory: read from the catalog once (the newest
// rateJobsScan successes), then added to as this process's jobs succeed
// (Manager.ended), so that pricing a job reads no job rows. Measured
// before, every claim read up to 200 job rows: at 10,000 one-off jobs of
// 1,000 records a quarter of a job's CPU. A job of the window that is
// deleted with its collection, or pruned, stays in it until newer ones
// push it out. Safe for concurrent use.
type rateWindow struct {
	mu      sync.Mutex
	loaded  bool
	samples []rateSample // oldest first, at most rateJobs
}

// addLocked appends s, dropping the oldest past rateJobs; w.mu is held.
func (w *rateWindow) addLocked(s rateSample) {
	if len(w.samples) == rateJobs {
		w.samples = append(w.samples[:0], w.samples[1:]...)
	}
	w.samples = append(w.samples, s)
}

// ended adds the sample of j, a job of this process that ended, once the
// window is loaded (before, the load reads it from the catalog).
func (w *rateWindow) ended(j catalog.Job, node string) {
	s, ok := sampleOf(j, node)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loaded {
		w.addLocked(s)
	}
}

// measure returns this node's throughput over its last rateJobs
// successful jobs that wrote bytes and recorded their actual figures
// (among the newest rateJobsScan successes when read from the catalog).
func (m *Manager) measure(ctx context.Context) (Rates, error) {
	w := &m.rates
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.loaded {
		jobs, err := m.store.ListJobs(ctx, catalog.JobFilter{States: []catalog.JobState{catalog.JobSucceeded}, Limit: rateJobsScan})
		if err != nil {
			return Rates{}, fmt.Errorf("read recent jobs: %w", err)
		}
		var newest []rateSample // newest first
		for _, j := range jobs {
			if s, ok := sampleOf(j, m.cfg.Node); ok && len(newest) < rateJobs {
				newest = append(newest, s)
			}
		}
		slices.Reverse(newest)
		w.samples, w.loaded = newest, true
	}
	return ratesOf(w.samples), nil
}

// Price prices estimate e with rates and the throughput cap in force
// (bytes per second; 0: none): the predicted duration is the bytes
// written at the measured write rate (the cap when it is lower) plus the
// vectors indexed at the measured index rate. Without a measured write
// rate the duration is unknown, unless a cap gives a lower bound.
func Price(e Estimate, r Rates, capBps int64) Prediction {
	p := Prediction{Estimate: e, Window: "now", VectorsPerSecond: r.VectorsPerSecond}
	vectors := e.VectorsToInsert
	rate, basis := r.BytesPerSecond, ""
	switch {
	case rate > 0 && capBps > 0 && float64(capBps) < rate:
		rate = float64(capBps)
		basis = fmt.Sprintf("writes at the cap of %s/s (measured %s/s over %d jobs)", humanize.IBytes(uint64(capBps)), humanize.IBytes(uint64(r.BytesPerSecond)), r.Jobs)
	case rate > 0:
		basis = fmt.Sprintf("writes at %s/s, measured over this node's last %d jobs", humanize.IBytes(uint64(rate)), r.Jobs)
	case capBps > 0:
		rate = float64(capBps)
		basis = fmt.Sprintf("no measurement yet: a lower bound, writing at the cap of %s/s", humanize.IBytes(uint64(capBps)))
	default:
		p.Basis = "no measurement yet: this node has no successful job with measured figures"
		return p
	}
	p.BytesPerSecond, p.SecondsKnown = rate, true
	p.WriteSeconds = float64(e.BytesWritten) / rate
	switch {
	case !e.Indexed || vectors == 0:
	case r.VectorsPerSecond > 0:
		p.IndexSeconds = float64(vectors) / r.VectorsPerSecond
		basis += fmt.Sprintf("; indexes %.0f vectors/s", r.VectorsPerSecond)
	default:
		basis += "; the index phase is not priced (no index build measured yet)"
	}
	p.Seconds = p.WriteSeconds + p.IndexSeconds
	p.Basis = basis
	return p
}

// pricer returns a function pricing estimates with this node's rates and
// cap, read once.
func (m *Manager) pricer(ctx context.Context) func(Estimate) Prediction {
	r, err := m.measure(ctx)
	if err != nil {
		m.logger.Warn("measure throughput for predictions", "err", err)
	}
	tp, err := m.throughput.read(ctx)
	if err != nil {
		m.logger.Warn("read the throughput cap for predictions", "err", err)
	}
	return func(e Estimate) Prediction { return Price(e, r, tp.BytesPerSecond) }
}

// InlineEstimator is implemented by an Executor that prices a job from its
// own work instead of being estimated before it runs: when EstimatesInline
// is true, the manager does not call Estimate before Prepare, and Prepare
// reports the estimate once in a Progress carrying only Estimate (for a
// compaction: once it has read the log slice, which an estimate would
// otherwise scan a second time before the job starts). The prediction is
// then stored from that report, before anything is written.
type InlineEstimator interface {
	EstimatesInline() bool
}

// estimatesInline reports whether exec prices its jobs itself
// (InlineEstimator).
func estimatesInline(exec Executor) bool {
	ie, ok := exec.(InlineEstimator)
	return ok && ie.EstimatesInline()
}

// predict makes and stores the prediction of run r, just claimed, when its
// executor estimates and does not do it inline. A failure is logged: the
// job runs without one.
func (m *Manager) predict(ctx context.Context, exec Executor, r *run) {
	est, ok := exec.(Estimator)
	if !ok || estimatesInline(exec) {
		return
	}
	e, err := est.Estimate(ctx, r.job.CollectionID)
	if err != nil {
		if ctx.Err() == nil {
			m.logger.Warn("predict job", "job", r.job.ID, "collection", r.job.CollectionID, "err", err)
		}
		return
	}
	m.storePrediction(ctx, r, e)
}

// storePrediction prices estimate e of run r's job and stores it as the
// job's prediction. A failure is logged.
func (m *Manager) storePrediction(ctx context.Context, r *run, e Estimate) {
	p := m.pricer(ctx)(e)
	if err := m.store.SetJobPrediction(ctx, r.job.ID, m.owner, p); err != nil {
		m.logger.Warn("store the prediction of job", "job", r.job.ID, "collection", r.job.CollectionID, "err", err)
		return
	}
	m.runs.predicted(r, &p)
}

// PredictionError is a job's actual figures against its prediction: each
// is actual/predicted - 1 (0: exact; 0.5: half again as much), and Known
// says which could be compared (a prediction of 0, or an unknown
// duration, cannot).
type PredictionError struct {
	Seconds, BytesWritten, BlobPuts, BytesRead     float64
	SecondsKnown, BytesKnown, PutsKnown, ReadKnown bool
}

// CompareToPrediction compares job j's actual figures with its prediction
// (zero when it has none).
func CompareToPrediction(j catalog.Job) PredictionError {
	var e PredictionError
	p := j.Predicted
	if p == nil || j.State != catalog.JobSucceeded {
		return e
	}
	ratio := func(actual, predicted float64) (float64, bool) {
		if predicted <= 0 {
			return 0, false
		}
		return actual/predicted - 1, true
	}
	if p.SecondsKnown && !j.StartedAt.IsZero() {
		e.Seconds, e.SecondsKnown = ratio(j.FinishedAt.Sub(j.StartedAt).Seconds(), p.Seconds)
	}
	// The prediction counts every byte put, the index's included; a job
	// row's BytesWritten counts blocks and manifest only.
	written, predicted := float64(j.BytesWritten), float64(p.BytesWritten-p.IndexBytes)
	if a := j.Actual; a != nil && a.BytesWritten > 0 {
		written, predicted = float64(a.BytesWritten), float64(p.BytesWritten)
	}
	e.BytesWritten, e.BytesKnown = ratio(written, predicted)
	if a := j.Actual; a != nil {
		e.BlobPuts, e.PutsKnown = ratio(float64(a.BlobPuts), float64(p.BlobPuts))
		e.BytesRead, e.ReadKnown = ratio(float64(a.BytesRead), float64(p.BytesRead))
	}
	return e
}

// observePrediction records a finished job's prediction error in
// compactor_plan_prediction_error_ratio.
func (m *metrics) observePrediction(j catalog.Job) {
	e := CompareToPrediction(j)
	if e.SecondsKnown {
		m.predictionError.WithLabelValues("duration").Observe(e.Seconds)
	}
	if e.BytesKnown {
		m.predictionError.WithLabelValues("bytes_written").Observe(e.BytesWritten)
	}
	if e.PutsKnown {
		m.predictionError.WithLabelValues("blob_puts").Observe(e.BlobPuts)
	}
}
