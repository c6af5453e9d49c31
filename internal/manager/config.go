package manager

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"

	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/flagcheck"
	"github.com/compactorhq/compactor/internal/window"
)

// Config tunes the manager. DefaultConfig gives the documented defaults.
type Config struct {
	// Interval between scheduler runs (default 10 s); each run waits a random
	// extra of up to 10% (jitter).
	Interval time.Duration
	// MinCompactionSize: a collection whose backlog (records) reaches it gets
	// a scheduled job (default 10).
	MinCompactionSize int64
	// MaxAge: a collection whose oldest uncompacted record is older gets a
	// scheduled job whatever its backlog (default 5 min).
	MaxAge time.Duration
	// Workers is the most jobs running at once (default 2).
	Workers int
	// PriorityAging is the aging step of the claim order: a queued job's
	// priority rank improves by one for every step it has waited, so that
	// a low-priority job is claimed within 3 steps plus the jobs queued
	// ahead of it then (default 5 min; see catalog.ClaimJob). The catalog
	// applies it (the binary passes it to catalog.Config); every replica
	// must use the same.
	PriorityAging time.Duration
	// Windows are the server's compaction windows (--compaction-window,
	// syntax of package window): scheduled jobs start only inside one of
	// them, unless a collection has windows of its own. Empty: any time.
	// One-off jobs always run.
	Windows []string
	// WindowClose is what happens to a scheduled job running when its
	// window closes: WindowCloseFinish (default) or WindowCloseRequeue.
	WindowClose string
	// DeadLetterAfter: consecutive non-transient failures that dead-letter a
	// collection (default 5).
	DeadLetterAfter int
	// DeadLetterCoolOff is how long after its dead-lettering a collection
	// is re-driven automatically, once (default 1 h); it is also re-driven
	// once under each server build (Version) other than the one that
	// dead-lettered it.
	DeadLetterCoolOff time.Duration
	// BackoffBase and BackoffMax bound the exponential backoff of scheduled
	// retries after failures: base·2^(n-1), at most max.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// HistoryKeep and HistoryMaxAge bound the finished jobs kept in the
	// catalog (count, age). History is operational, not an audit log.
	HistoryKeep   int
	HistoryMaxAge time.Duration
	// ShutdownTimeout is how long running jobs may finish at shutdown
	// before they are cancelled.
	ShutdownTimeout time.Duration
	// Node names this process on the jobs it runs and in the catalog's
	// list of nodes (default: host name). Unique per replica.
	Node string
	// Address and Version describe this node in the list of nodes (set by
	// the binary: its listen address and build version).
	Address, Version string

	// LeaseDuration is how long a claimed job stays this node's without a
	// renewal (default 30 s). A replica that dies holds its jobs that long,
	// then any replica takes them over; a renewal late by more than that
	// stops the job, whose commit would be refused.
	LeaseDuration time.Duration
	// RenewInterval is how often a running job's lease is renewed, its
	// progress persisted and a cancel request from another replica seen
	// (default 2 s; under LeaseDuration/3).
	RenewInterval time.Duration
	// PollInterval is how often this node reads the jobs of the other
	// replicas (status, progress, expired leases) and how long an idle
	// worker waits before it looks for jobs queued elsewhere (default 1 s).
	PollInterval time.Duration
	// HeartbeatInterval is how often this node refreshes its registration;
	// a node silent for three intervals is shown as gone (default 5 s).
	HeartbeatInterval time.Duration
	// MaxThroughput caps the bytes per second the compactions of this node
	// write (0: no cap), unless an operator set a cap for every node at run
	// time (SetMaxThroughput), which takes precedence.
	MaxThroughput int64
	// PersistTimeout bounds the catalog writes that record the end of a job
	// (its row, the collection's failure count, its continuation); they
	// outlive cancel and shutdown. They may wait for the catalog's single
	// writer while another job commits, so the binary sets it to the
	// compaction's --commit-timeout (default 10 min); it has no flag of its
	// own.
	PersistTimeout time.Duration
	// TracerProvider makes the span of every job ("compaction job", with
	// the executor's spans under it). Nil: no spans. Not a flag: the
	// binary builds it from the OTEL_* environment.
	TracerProvider trace.TracerProvider
	// Clock is the process's clock (nil: the system's): its wall time for
	// the times jobs record, its monotonic clock for durations, ETAs and
	// the lease keeper's deadline, so that setting the system time never
	// fails a live job nor records a negative duration. Leases themselves
	// are timed by the catalog's database clock. Not a flag: tests set it.
	Clock clock.Clock
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Interval:          10 * time.Second,
		MinCompactionSize: 10,
		MaxAge:            5 * time.Minute,
		Workers:           2,
		PriorityAging:     5 * time.Minute,
		WindowClose:       WindowCloseFinish,
		DeadLetterAfter:   5,
		DeadLetterCoolOff: time.Hour,
		BackoffBase:       10 * time.Second,
		BackoffMax:        10 * time.Minute,
		HistoryKeep:       10_000,
		HistoryMaxAge:     30 * 24 * time.Hour,
		ShutdownTimeout:   30 * time.Second,
		LeaseDuration:     30 * time.Second,
		RenewInterval:     2 * time.Second,
		PollInterval:      time.Second,
		HeartbeatInterval: 5 * time.Second,
		PersistTimeout:    10 * time.Minute,
	}
}

// RegisterFlags registers the manager's flags on fs with c's values as
// defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.Interval, "schedule-interval", c.Interval, "time between scheduler runs")
	fs.Int64Var(&c.MinCompactionSize, "min-compaction-size", c.MinCompactionSize, "backlog (records) at which the scheduler compacts a collection")
	fs.DurationVar(&c.MaxAge, "max-uncompacted-age", c.MaxAge, "age of the oldest uncompacted record at which the scheduler compacts a collection")
	fs.IntVar(&c.Workers, "workers", c.Workers, "most compaction jobs running at once")
	fs.DurationVar(&c.PriorityAging, "priority-aging", c.PriorityAging, "aging step of the claim order: a queued job's priority rank improves by one per step waited (the same on every replica)")
	fs.StringArrayVar(&c.Windows, "compaction-window", c.Windows, `compaction window in which scheduled jobs may start, "[DAYS] HH:MM-HH:MM [ZONE]" (e.g. "Mon-Fri 01:00-05:00 Europe/Berlin"; UTC by default); repeatable; none: any time`)
	fs.StringVar(&c.WindowClose, "window-close", c.WindowClose, "what a scheduled job running when its window closes does: finish, or requeue (stop at the next batch boundary, run again in the next window)")
	fs.IntVar(&c.DeadLetterAfter, "dead-letter-after", c.DeadLetterAfter, "consecutive non-transient failures that dead-letter a collection")
	fs.DurationVar(&c.DeadLetterCoolOff, "dead-letter-cooloff", c.DeadLetterCoolOff, "time after its dead-lettering at which a collection is re-driven automatically, once (it is also re-driven once after each upgrade)")
	fs.DurationVar(&c.BackoffBase, "retry-backoff", c.BackoffBase, "first retry delay after a failed job; doubles per consecutive failure")
	fs.DurationVar(&c.BackoffMax, "retry-backoff-max", c.BackoffMax, "longest retry delay")
	fs.IntVar(&c.HistoryKeep, "history-keep", c.HistoryKeep, "finished jobs kept in the history")
	fs.DurationVar(&c.HistoryMaxAge, "history-max-age", c.HistoryMaxAge, "age after which finished jobs leave the history")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long running jobs may finish at shutdown before they are cancelled")
	fs.StringVar(&c.Node, "node", c.Node, "name of this node on the jobs it runs and in the list of nodes; unique per replica (default: host name)")
	fs.DurationVar(&c.LeaseDuration, "lease-duration", c.LeaseDuration, "how long a running job stays this node's without a lease renewal; then another replica takes it over")
	fs.DurationVar(&c.RenewInterval, "lease-renew-interval", c.RenewInterval, "how often a running job's lease is renewed and its progress persisted")
	fs.DurationVar(&c.PollInterval, "status-poll-interval", c.PollInterval, "how often other replicas' jobs are read (status, expired leases, jobs to claim)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.HeartbeatInterval, "how often this node refreshes its registration in the catalog")
	fs.Var((*byteSize)(&c.MaxThroughput), "max-throughput", "bytes per second the compactions of this node may write, e.g. 64MiB (0: no cap); 'compactor throttle' overrides it at run time for every node")
}

// Validate rejects zero or negative intervals, sizes and counts.
func (c Config) Validate() error {
	if err := flagcheck.First(
		flagcheck.Positive("--schedule-interval", c.Interval),
		flagcheck.Positive("--min-compaction-size", c.MinCompactionSize),
		flagcheck.Positive("--max-uncompacted-age", c.MaxAge),
		flagcheck.That(c.Workers > 0 && c.Workers <= 256, "--workers must be in 1..256, got %d", c.Workers),
		flagcheck.AtLeast("--priority-aging", c.PriorityAging, time.Second),
		flagcheck.That(c.WindowClose == WindowCloseFinish || c.WindowClose == WindowCloseRequeue,
			"--window-close must be %s or %s, got %q", WindowCloseFinish, WindowCloseRequeue, c.WindowClose),
		flagcheck.Positive("--dead-letter-after", c.DeadLetterAfter),
		flagcheck.That(c.DeadLetterCoolOff >= time.Minute, "--dead-letter-cooloff must be at least 1m, got %s", c.DeadLetterCoolOff),
		flagcheck.That(c.BackoffBase > 0 && c.BackoffMax >= c.BackoffBase,
			"--retry-backoff must be positive and at most --retry-backoff-max, got %s and %s", c.BackoffBase, c.BackoffMax),
		flagcheck.Positive("--history-keep", c.HistoryKeep),
		flagcheck.Positive("--history-max-age", c.HistoryMaxAge),
		flagcheck.NotNegative("--shutdown-timeout", c.ShutdownTimeout),
		flagcheck.That(!strings.Contains(c.Node, "/"), "--node must not contain \"/\", got %q", c.Node),
		flagcheck.AtLeast("--lease-duration", c.LeaseDuration, time.Second),
		flagcheck.That(c.RenewInterval > 0 && 3*c.RenewInterval <= c.LeaseDuration,
			"--lease-renew-interval must be positive and at most a third of --lease-duration (%s), got %s", c.LeaseDuration, c.RenewInterval),
		flagcheck.Positive("--status-poll-interval", c.PollInterval),
		flagcheck.Positive("--heartbeat-interval", c.HeartbeatInterval),
		flagcheck.NotNegative("--max-throughput", c.MaxThroughput),
		flagcheck.Positive("the persist timeout of finished jobs (--commit-timeout)", c.PersistTimeout),
	); err != nil {
		return err
	}
	if _, err := window.ParseSet(c.Windows); err != nil {
		return fmt.Errorf("--compaction-window: %w", err)
	}
	return nil
}

// byteSize is a flag of bytes written with units: "64MiB", "1.5GB", "0".
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }
func (b *byteSize) Type() string   { return "bytes" }
func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > math.MaxInt64 {
		return fmt.Errorf("%q is not a size in bytes (e.g. 64MiB, 500MB, 0)", s)
	}
	*b = byteSize(n)
	return nil
}
