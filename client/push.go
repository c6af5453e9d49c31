package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/sethvargo/go-retry"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// MaxPushBatch is the most records one PushLogs call takes (the server's
// limit).
const MaxPushBatch = 10_000

// Defaults of PushOptions.
const (
	DefaultPushBatch     = 1000
	DefaultPushRetries   = 10
	DefaultPushRetryWait = 200 * time.Millisecond
	DefaultPushRetryMax  = 5 * time.Second
)

// PushOptions tune Push and a Pusher. The zero value gives the defaults.
type PushOptions struct {
	// BatchSize is the records per PushLogs call of Push, 1..MaxPushBatch;
	// 0: DefaultPushBatch. (Pusher.Send sends the batch it is given.)
	BatchSize int
	// Retries is how often one batch is tried again after the server
	// refused it for backpressure (RESOURCE_EXHAUSTED with reason
	// BACKLOG_LIMIT) or its answer was lost (UNAVAILABLE, or the call's
	// deadline passed while ctx is live); 0: DefaultPushRetries; negative:
	// never.
	Retries int
	// RetryWait is the first wait before a retry, doubled at each further
	// one with 20% jitter; 0: DefaultPushRetryWait.
	RetryWait time.Duration
	// RetryMax caps the wait between two tries; 0: DefaultPushRetryMax.
	RetryMax time.Duration
	// CallTimeout bounds each PushLogs call; 0: only ctx does.
	CallTimeout time.Duration
	// RunID is the first part of every batch's idempotency key ("RUN/N");
	// "": 16 random hex digits. Give the same RunID only to a run that
	// sends the same batches in the same order (a resumed run).
	RunID string
	// OnRetry, when set, is called before each retry with the error of the
	// try, the retry's number (1..max), the most retries and the wait.
	OnRetry func(err error, retry, max int, wait time.Duration)
	// OnReplay, when set, is called with the key of a batch that the
	// server answered from its key: an earlier try had appended it and its
	// answer was lost; nothing was appended twice.
	OnReplay func(key string)
}

func (o PushOptions) withDefaults() PushOptions {
	if o.BatchSize == 0 {
		o.BatchSize = DefaultPushBatch
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultPushRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.RetryWait == 0 {
		o.RetryWait = DefaultPushRetryWait
	}
	if o.RetryMax == 0 {
		o.RetryMax = max(DefaultPushRetryMax, o.RetryWait)
	}
	return o
}

// validate names the first bad field.
func (o PushOptions) validate() error {
	switch {
	case o.BatchSize < 1 || o.BatchSize > MaxPushBatch:
		return fmt.Errorf("PushOptions.BatchSize must be in 1..%d, got %d", MaxPushBatch, o.BatchSize)
	case o.RetryWait < 0:
		return fmt.Errorf("PushOptions.RetryWait must not be negative, got %s", o.RetryWait)
	case o.RetryMax < o.RetryWait:
		return fmt.Errorf("PushOptions.RetryMax %s is below RetryWait %s", o.RetryMax, o.RetryWait)
	case o.CallTimeout < 0:
		return fmt.Errorf("PushOptions.CallTimeout must not be negative, got %s", o.CallTimeout)
	}
	return nil
}

// PushResult sums up what a Pusher appended.
type PushResult struct {
	// Records appended, and the batches (PushLogs calls that appended).
	Records int64
	Batches int
	// FirstOffset and LastOffset are the log offsets of the first and the
	// last record appended; 0 when none was.
	FirstOffset, LastOffset int64
	// Retries counts the retries of every batch; ReplayedBatches the
	// batches the server answered from their key (their first answer had
	// been lost).
	Retries         int
	ReplayedBatches int
}

// InvalidRecordError is the error of Push and Pusher.Send when the server
// rejected a record: every record before it was appended, none from it on.
type InvalidRecordError struct {
	// Index is the record's position in the records given to Push or Send.
	Index int
	// Record is the server's account: id, field and problem.
	Record *compactorv1.InvalidRecord
	// Err is the INVALID_ARGUMENT error of the call.
	Err error
}

func (e *InvalidRecordError) Error() string {
	field := e.Record.GetField()
	if field == "" {
		field = "-"
	}
	return fmt.Sprintf("record %d (id %q): %s: %s: %s", e.Index, e.Record.GetId(), connect.CodeOf(e.Err), field, e.Record.GetProblem())
}

func (e *InvalidRecordError) Unwrap() error { return e.Err }

// A Pusher appends batches of operation records to one collection's log,
// each batch with an idempotency key, retrying a batch with the same key
// while the server refuses it for backpressure or its answer is lost, so
// that no batch is ever appended twice (the server keeps keys for its
// --push-key-window, 24 h by default). A Pusher is for one goroutine.
type Pusher struct {
	c          *Client
	collection string
	opts       PushOptions
	seq        int
	res        PushResult
}

// NewPusher returns a Pusher to the collection with id collectionID. It
// fails only for bad opts, naming the field.
func (c *Client) NewPusher(collectionID string, opts PushOptions) (*Pusher, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.RunID == "" {
		opts.RunID = newRunID()
	}
	return &Pusher{c: c, collection: collectionID, opts: opts}, nil
}

// Result is what the Pusher has appended so far.
func (p *Pusher) Result() PushResult { return p.res }

// Send appends records (at most MaxPushBatch; a batch is appended whole or
// not at all) as the next batch, with key "RUN/N". It returns how many
// records of the batch are appended: all of them with a nil error. When
// the server rejects record i, the records before it are appended as a
// batch of their own (key "RUN/N/first-i") and the error is an
// *InvalidRecordError with Index i. Other errors: RESOURCE_EXHAUSTED after
// Retries refusals for backpressure, or for a batch larger than the
// server's backlog limit (never retried: send smaller batches), or a full
// disk on the server; UNAVAILABLE or DEADLINE_EXCEEDED after Retries lost
// answers (the batch may or may not have been appended: Send it again with
// the same Pusher state, or resume with the same RunID); ctx's error.
func (p *Pusher) Send(ctx context.Context, records []*compactorv1.OperationRecord) (int, error) {
	if len(records) == 0 {
		return 0, nil
	}
	if len(records) > MaxPushBatch {
		return 0, fmt.Errorf("push a batch of %d records: at most %d per batch", len(records), MaxPushBatch)
	}
	p.seq++
	key := fmt.Sprintf("%s/%d", p.opts.RunID, p.seq)
	err := p.send(ctx, key, records)
	if err == nil {
		return len(records), nil
	}
	rec := InvalidRecord(err, len(records))
	if rec == nil {
		return 0, err
	}
	i := int(rec.GetIndex())
	if i > 0 {
		// Another batch, so another key (the refused one wrote nothing).
		if perr := p.send(ctx, fmt.Sprintf("%s/first-%d", key, i), records[:i]); perr != nil {
			return 0, fmt.Errorf("push the %d records before invalid record %d: %w", i, i, perr)
		}
	}
	return i, &InvalidRecordError{Index: i, Record: rec, Err: err}
}

// Push appends records to the log of the collection with id collectionID
// in batches of opts.BatchSize, each sent by a Pusher (see Pusher.Send for
// keys, retries and errors). The result counts what was appended, also
// when an error stops the push: the records before the failed batch were
// appended; for an *InvalidRecordError (Index within records) every record
// before Index was, none from it on.
func (c *Client) Push(ctx context.Context, collectionID string, records []*compactorv1.OperationRecord, opts PushOptions) (PushResult, error) {
	p, err := c.NewPusher(collectionID, opts)
	if err != nil {
		return PushResult{}, err
	}
	size := p.opts.BatchSize
	for start := 0; start < len(records); start += size {
		_, err := p.Send(ctx, records[start:min(len(records), start+size)])
		var ire *InvalidRecordError
		if errors.As(err, &ire) {
			ire.Index += start
		}
		if err != nil {
			return p.res, err
		}
	}
	return p.res, nil
}

// newRunID returns a random id for the keys of one run: 16 hex digits.
func newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// lostAnswer reports whether err may hide an append that committed: the
// server or a proxy went away (UNAVAILABLE), or the call's deadline expired
// (DEADLINE_EXCEEDED) while ctx itself is still live.
func lostAnswer(ctx context.Context, err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return true
	case connect.CodeDeadlineExceeded:
		return ctx.Err() == nil
	}
	return false
}

// send pushes records with the idempotency key key, retrying with the same
// key while the server refuses them for backpressure or the answer is lost.
func (p *Pusher) send(ctx context.Context, key string, records []*compactorv1.OperationRecord) error {
	req := &compactorv1.PushLogsRequest{CollectionId: p.collection, Records: records, IdempotencyKey: key}
	var (
		last      error  // of the last try
		giveUp    string // why, when the retries run out
		tries     int
		exhausted bool
	)
	limit := func(b retry.Backoff) retry.Backoff { return retry.WithMaxRetries(uint64(p.opts.Retries), b) }
	b := backoff(p.opts.RetryWait, p.opts.RetryMax, limit, func(d time.Duration, stop bool) {
		exhausted = stop
		if !stop {
			tries++
			p.res.Retries++
			if p.opts.OnRetry != nil {
				p.opts.OnRetry(last, tries, p.opts.Retries, d)
			}
		}
	})
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if p.opts.CallTimeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, p.opts.CallTimeout)
		}
		res, err := p.c.Logs.PushLogs(cctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			p.landed(key, res.Msg)
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return err
		}
		switch reason := Reason(err); {
		case reason == compactorv1.ErrorReason_ERROR_REASON_BACKLOG_LIMIT:
			giveUp = "the collection's backlog stayed at the server's limit; compact it or retry later"
		case reason == compactorv1.ErrorReason_ERROR_REASON_BATCH_OVER_BACKLOG_LIMIT:
			return fmt.Errorf("%w (the batch alone exceeds the server's --max-backlog: send smaller batches)", err)
		case lostAnswer(ctx, err):
			giveUp = "the server did not answer; the batches before were pushed, this one may or may not have been"
		default: // any other error, RESOURCE_EXHAUSTED for an oversized request or a full disk included
			return err
		}
		return retry.RetryableError(err)
	})
	if err != nil && exhausted && ctx.Err() == nil {
		return fmt.Errorf("%w (gave up after %d retries: %s)", err, p.opts.Retries, giveUp)
	}
	return err
}

// landed counts a batch the server appended (or had appended: replayed).
func (p *Pusher) landed(key string, m *compactorv1.PushLogsResponse) {
	if p.res.Records == 0 {
		p.res.FirstOffset = m.GetFirstOffset()
	}
	p.res.LastOffset = m.GetLastOffset()
	p.res.Records += int64(m.GetCount())
	p.res.Batches++
	if m.GetReplayed() {
		p.res.ReplayedBatches++
		if p.opts.OnReplay != nil {
			p.opts.OnReplay(key)
		}
	}
}
