package manager

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/trace"
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
	// DeadLetterAfter: consecutive non-transient failures that dead-letter a
	// collection (default 5).
	DeadLetterAfter int
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
	// Node names this process on the jobs it runs (default: host name).
	Node string
	// TracerProvider makes the span of every job ("compaction job", with
	// the executor's spans under it). Nil: no spans. Not a flag: the
	// binary builds it from the OTEL_* environment.
	TracerProvider trace.TracerProvider
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Interval:          10 * time.Second,
		MinCompactionSize: 10,
		MaxAge:            5 * time.Minute,
		Workers:           2,
		DeadLetterAfter:   5,
		BackoffBase:       10 * time.Second,
		BackoffMax:        10 * time.Minute,
		HistoryKeep:       10_000,
		HistoryMaxAge:     30 * 24 * time.Hour,
		ShutdownTimeout:   30 * time.Second,
	}
}

// RegisterFlags registers the manager's flags on fs with c's values as
// defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.Interval, "schedule-interval", c.Interval, "time between scheduler runs")
	fs.Int64Var(&c.MinCompactionSize, "min-compaction-size", c.MinCompactionSize, "backlog (records) at which the scheduler compacts a collection")
	fs.DurationVar(&c.MaxAge, "max-uncompacted-age", c.MaxAge, "age of the oldest uncompacted record at which the scheduler compacts a collection")
	fs.IntVar(&c.Workers, "workers", c.Workers, "most compaction jobs running at once")
	fs.IntVar(&c.DeadLetterAfter, "dead-letter-after", c.DeadLetterAfter, "consecutive non-transient failures that dead-letter a collection")
	fs.DurationVar(&c.BackoffBase, "retry-backoff", c.BackoffBase, "first retry delay after a failed job; doubles per consecutive failure")
	fs.DurationVar(&c.BackoffMax, "retry-backoff-max", c.BackoffMax, "longest retry delay")
	fs.IntVar(&c.HistoryKeep, "history-keep", c.HistoryKeep, "finished jobs kept in the history")
	fs.DurationVar(&c.HistoryMaxAge, "history-max-age", c.HistoryMaxAge, "age after which finished jobs leave the history")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long running jobs may finish at shutdown before they are cancelled")
	fs.StringVar(&c.Node, "node", c.Node, "name of this node on the jobs it runs (default: host name)")
}

// Validate rejects zero or negative intervals, sizes and counts.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("--schedule-interval must be positive, got %s", c.Interval)
	case c.MinCompactionSize <= 0:
		return fmt.Errorf("--min-compaction-size must be positive, got %d", c.MinCompactionSize)
	case c.MaxAge <= 0:
		return fmt.Errorf("--max-uncompacted-age must be positive, got %s", c.MaxAge)
	case c.Workers <= 0 || c.Workers > 256:
		return fmt.Errorf("--workers must be in 1..256, got %d", c.Workers)
	case c.DeadLetterAfter <= 0:
		return fmt.Errorf("--dead-letter-after must be positive, got %d", c.DeadLetterAfter)
	case c.BackoffBase <= 0 || c.BackoffMax < c.BackoffBase:
		return fmt.Errorf("--retry-backoff must be positive and at most --retry-backoff-max, got %s and %s", c.BackoffBase, c.BackoffMax)
	case c.HistoryKeep <= 0:
		return fmt.Errorf("--history-keep must be positive, got %d", c.HistoryKeep)
	case c.HistoryMaxAge <= 0:
		return fmt.Errorf("--history-max-age must be positive, got %s", c.HistoryMaxAge)
	case c.ShutdownTimeout < 0:
		return fmt.Errorf("--shutdown-timeout must not be negative, got %s", c.ShutdownTimeout)
	}
	return nil
}
