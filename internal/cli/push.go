package cli

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/format"
)

// Push limits.
const (
	maxPushBatch     = client.MaxPushBatch
	maxPushLineBytes = 64 << 20 // longest accepted input line
	// maxPushBatchBytes bounds the input bytes of one batch, so that a
	// batch of large documents stays well under the server's request limit
	// (64 MiB by default).
	maxPushBatchBytes = 16 << 20
)

// pushOptions are the settings of one push.
type pushOptions struct {
	file       string // FILE, or - for stdin
	collection string // id or name
	opName     string // --op
	batch      int
	retries    int           // tries after backpressure or a lost answer, per batch
	retryWait  time.Duration // first wait; doubled each time (with jitter), capped by retryMax
	retryMax   time.Duration

	op compactorv1.Operation // of lines without "op", set by validate
}

// Values of --op, also offered by shell completion.
var operations = []string{"add", "update", "upsert", "delete"}

func (o *pushOptions) validate() error {
	var ok bool
	if o.op, ok = parseEnum[compactorv1.Operation](o.opName, "OPERATION_", compactorv1.Operation_value); !ok {
		return fmt.Errorf("--op %q: want add, update, upsert or delete", o.opName)
	}
	switch {
	case o.collection == "":
		return errors.New("--collection is required")
	case o.batch < 1 || o.batch > maxPushBatch:
		return fmt.Errorf("--batch must be in 1..%d, got %d", maxPushBatch, o.batch)
	case o.retries < 0:
		return fmt.Errorf("--retries must not be negative, got %d", o.retries)
	case o.retryWait <= 0:
		return fmt.Errorf("--retry-wait must be positive, got %s", o.retryWait)
	case o.retryMax < o.retryWait:
		return fmt.Errorf("the longest wait between retries (%s) is below --retry-wait %s", o.retryMax, o.retryWait)
	}
	return nil
}

func newPushCmd(g *globals) *cobra.Command {
	opts := pushOptions{retryMax: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "push --collection COLLECTION [--op add|update|upsert|delete] [--batch N] [--retries N] [--retry-wait D] FILE",
		Short: "Append the operation records of a JSON Lines file to a collection's log",
		Long: `Append the operation records of a JSON Lines file (FILE, or - for stdin) to a
collection's write-ahead log (--collection: its id or its name), in batches of --batch records (one PushLogs call
each; a batch is appended whole or not at all). Gzip input (a .gz name, or gzip
data on stdin) is read directly.

One operation per line:

  {"op": "add", "id": "0ad", "embedding": [0.1, ...], "document": "...", "metadata": {"section": "games"}}

"op" is add, update, upsert or delete, and defaults to --op; "id" is required
and non-empty; "embedding" (numbers), "document" (a string) and "metadata" (an
object of strings, numbers, booleans or null) are optional, though add and
upsert need an embedding of the collection's dimension. Unknown fields are
errors, to catch typos. Blank lines are skipped. The server validates the
rest.

Errors: a bad line stops the push with an error naming FILE and the line
number ("FILE:LINE: ..."), whether the line is malformed here or rejected by
the server (whose "records[i]" errors are mapped back to their line). Every line before the bad
one has been pushed, none after: the error says so ("lines 1..N were pushed"),
so fix the line and resume with the rest of the file (for example with
'tail -n +LINE'). When the server refuses a batch because the collection's
backlog is at its limit (resource_exhausted), the batch is retried with
exponential backoff (from --retry-wait, doubling, at most 5s apart, with 20%
jitter so that many clients do not retry in step) up to
--retries times, then the push fails.

Retries never append twice: every batch carries an idempotency key (a random
id of the run and the batch number, "RUN/N"), and a retry reuses its batch's
key, so a batch whose answer was lost (the server or a proxy went away after
the append committed: unavailable, or the --timeout of a call expired) is
retried the same way (up to --retries times) and the server answers a retry
of a batch it already has with the first offsets, writing nothing. The
server keeps keys for its --push-key-window (default 24h). A full disk on the
server (resource_exhausted, "... is out of space") is not retried: an
operator must free space first.

A progress bar is drawn on stderr when it is a terminal. At the end a summary
is printed: records pushed, log offsets, time and rate. -o json prints it as
an object: {"collection_id", "file", "lines", "records", "batches",
"first_offset", "last_offset", "seconds", "records_per_second", "retries",
"replayed_batches"} (replayed_batches: retries the server answered from a
batch's key, i.e. whose first answer had been lost).`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(g, func(_ *cobra.Command, args []string) error {
			opts.file = args[0]
			return opts.validate()
		}, func(ctx context.Context, s *session, _ []string) error { return s.push(ctx, opts) }),
	}
	f := cmd.Flags()
	f.StringVar(&opts.collection, "collection", "", "id or name of the collection to append to (required)")
	f.StringVar(&opts.opName, "op", "add", "operation of lines without \"op\": add, update, upsert or delete")
	f.IntVar(&opts.batch, "batch", 1000, fmt.Sprintf("records per PushLogs call (1..%d)", maxPushBatch))
	f.IntVar(&opts.retries, "retries", 10, "retries of a batch refused for backpressure (resource_exhausted) or whose answer was lost (unavailable, deadline_exceeded)")
	f.DurationVar(&opts.retryWait, "retry-wait", 200*time.Millisecond, "first wait before retrying a refused batch; doubled each time (with 20% jitter), at most 5s")
	_ = cmd.RegisterFlagCompletionFunc("collection", completeCollections(g, -1))
	_ = cmd.RegisterFlagCompletionFunc("op", fixedCompletion(operations...))
	for _, f := range []string{"batch", "retries", "retry-wait"} {
		_ = cmd.RegisterFlagCompletionFunc(f, cobra.NoFileCompletions)
	}
	return cmd
}

// pushResult is the summary of a push.
type pushResult struct {
	CollectionID     string  `json:"collection_id"`
	File             string  `json:"file"`
	Lines            int     `json:"lines"`
	Records          int64   `json:"records"`
	Batches          int     `json:"batches"`
	FirstOffset      int64   `json:"first_offset,omitempty"`
	LastOffset       int64   `json:"last_offset,omitempty"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSecond float64 `json:"records_per_second"`
	Retries          int     `json:"retries"`
	ReplayedBatches  int     `json:"replayed_batches"`
}

// pusher reads one file and pushes its records in batches through a
// client.Pusher (keys, retries, the split at an invalid record).
type pusher struct {
	s     *session
	opts  pushOptions
	name  string   // FILE as the user gave it, for errors
	bar   *pushBar // nil unless stderr is a terminal
	coll  string   // the collection's name
	res   pushResult
	api   *client.Pusher
	batch []*compactorv1.OperationRecord
	lines []int // input line of each record of batch
	bytes int   // input bytes of batch
	// pushed is the last line such that every line up to it has been
	// pushed (or was blank).
	pushed int
}

func (s *session) push(ctx context.Context, opts pushOptions) error {
	file := opts.file
	// Fail fast, before reading a large file, when the collection is unknown.
	id, err := s.resolveCollection(ctx, opts.collection)
	if err != nil {
		return err
	}
	opts.collection = id
	p := &pusher{s: s, opts: opts, name: file, res: pushResult{CollectionID: id, File: file}}
	if file == "-" {
		p.name = "<stdin>"
	}
	retries := opts.retries
	if retries == 0 {
		retries = -1 // none; the client's 0 is its default
	}
	p.api, err = s.c.api.NewPusher(id, client.PushOptions{
		BatchSize: opts.batch, Retries: retries, RetryWait: opts.retryWait, RetryMax: opts.retryMax,
		CallTimeout: s.g.timeout,
		OnRetry: func(err error, n, max int, wait time.Duration) {
			p.note("push: %v; retry %d/%d in %s", err, n, max, format.Duration(wait))
		},
		OnReplay: func(key string) {
			p.note("push: batch %s had been appended by an earlier try whose answer was lost; not appended again", key)
		},
	})
	if err != nil {
		return err
	}
	coll, err := s.collection(ctx, id)
	if err != nil {
		return err
	}
	p.coll = coll.GetName()
	var raw io.Reader = s.g.streams.In
	size := int64(-1)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		raw = f
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
	}
	if isTerminal(s.out.errw) {
		p.bar = newPushBar(s.out.errw, size, filepath.Base(p.name))
		raw = p.bar.reader(raw) // bytes of FILE as stored
	}
	in, err := decompress(raw, strings.HasSuffix(file, ".gz"))
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	start := time.Now()
	err = p.run(ctx, in)
	p.tally()
	if p.bar != nil {
		p.bar.finish(err == nil)
	}
	if err != nil {
		if interrupted(ctx, err) {
			return &ExitError{Code: 130, Err: fmt.Errorf("%s: interrupted; %s", p.name, p.pushedText())}
		}
		return err
	}
	el := time.Since(start)
	p.res.Seconds = el.Seconds()
	if el > 0 {
		p.res.RecordsPerSecond = float64(p.res.Records) / el.Seconds()
	}
	if s.out.json {
		return s.out.writeJSON(p.res)
	}
	offsets := "none"
	if p.res.Records > 0 {
		offsets = fmt.Sprintf("%d..%d", p.res.FirstOffset, p.res.LastOffset)
	}
	_, err = fmt.Fprintf(s.out.w, "pushed %s from %s (%s) to collection %s (%s) in %s: log offsets %s, %s, %.0f records/s\n",
		plural(p.res.Records, "record"), p.name, plural(int64(p.res.Lines), "line"), safeText(p.coll), opts.collection, plural(int64(p.res.Batches), "batch"), offsets, format.Duration(el), p.res.RecordsPerSecond)
	return err
}

// decompress returns r, gunzipped when gz is set or r starts with the gzip
// magic number.
func decompress(r io.Reader, gz bool) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if !gz {
		magic, _ := br.Peek(2)
		gz = len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
	}
	if !gz {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("read gzip: %w", err)
	}
	return zr, nil
}

// run reads the lines and pushes them.
func (p *pusher) run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxPushLineBytes)
	line := 0
	for sc.Scan() {
		line++
		p.res.Lines = line
		if p.bar != nil {
			p.bar.line()
		}
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			if len(p.batch) == 0 && p.pushed == line-1 {
				p.pushed = line
			}
			continue
		}
		rec, err := parseLine(text, p.opts.op)
		if err != nil {
			// Push what precedes the bad line, so that the error leaves a
			// clean resume point.
			if ferr := p.flush(ctx); ferr != nil {
				return ferr
			}
			return p.lineError(line, err)
		}
		p.batch = append(p.batch, rec)
		p.lines = append(p.lines, line)
		p.bytes += len(text)
		if len(p.batch) >= p.opts.batch || p.bytes >= maxPushBatchBytes {
			if err := p.flush(ctx); err != nil {
				return err
			}
			p.pushed = line
		}
	}
	if err := sc.Err(); err != nil {
		if ferr := p.flush(ctx); ferr != nil {
			return ferr
		}
		if errors.Is(err, bufio.ErrTooLong) {
			return p.lineError(line+1, fmt.Errorf("longer than %d MiB", maxPushLineBytes>>20))
		}
		return fmt.Errorf("%s: read after line %d: %w; %s", p.name, line, err, p.pushedText())
	}
	if err := p.flush(ctx); err != nil {
		return err
	}
	p.pushed = line
	return nil
}

// lineError is the error of a bad line.
func (p *pusher) lineError(line int, err error) error {
	p.pushed = line - 1
	return fmt.Errorf("%s:%d: %w; %s", p.name, line, err, p.pushedText())
}

// pushedText says which lines were pushed, for an error.
func (p *pusher) pushedText() string {
	switch {
	case p.res.Records == 0:
		return "nothing was pushed"
	case p.pushed <= 1:
		return "line 1 was pushed"
	}
	return fmt.Sprintf("lines 1..%d were pushed (log offsets %d..%d)", p.pushed, p.res.FirstOffset, p.res.LastOffset)
}

// flush pushes the current batch. When the server rejects record i of the
// batch, the records before it are pushed and the error names record i's
// line.
func (p *pusher) flush(ctx context.Context) error {
	if len(p.batch) == 0 {
		return nil
	}
	batch, lines := p.batch, p.lines
	p.batch, p.lines, p.bytes = p.batch[:0:0], p.lines[:0:0], 0
	_, err := p.api.Send(ctx, batch)
	p.tally()
	if err == nil {
		p.pushed = lines[len(lines)-1]
		return nil
	}
	var bad *client.InvalidRecordError
	if !errors.As(err, &bad) {
		p.pushed = lines[0] - 1
		what := fmt.Sprintf("%s lines %d..%d", p.name, lines[0], lines[len(lines)-1])
		if len(lines) == 1 {
			what = fmt.Sprintf("%s line %d", p.name, lines[0])
		}
		if client.Reason(err) == compactorv1.ErrorReason_ERROR_REASON_BATCH_OVER_BACKLOG_LIMIT {
			err = fmt.Errorf("%w; lower --batch", err)
		}
		return fmt.Errorf("push %s: %w; %s", what, err, p.pushedText())
	}
	rec := bad.Record
	return p.lineError(lines[bad.Index], fmt.Errorf("%s: %s: %s (id %q)", connect.CodeOf(err), orDash(safeText(rec.GetField())), safeText(rec.GetProblem()), batch[bad.Index].GetId()))
}

// tally copies the client's counts into the summary.
func (p *pusher) tally() {
	r := p.api.Result()
	p.res.Records, p.res.Batches, p.res.Retries, p.res.ReplayedBatches = r.Records, r.Batches, r.Retries, r.ReplayedBatches
	p.res.FirstOffset, p.res.LastOffset = r.FirstOffset, r.LastOffset
}

// note tells the user something on stderr, above the progress bar.
func (p *pusher) note(format string, args ...any) {
	if p.bar != nil {
		p.bar.note(format, args...)
		return
	}
	p.s.out.note(format, args...)
}

// pushLine is one input line.
type pushLine struct {
	Op        *string         `json:"op"`
	ID        *string         `json:"id"`
	Embedding []float32       `json:"embedding"`
	Document  *string         `json:"document"`
	Metadata  json.RawMessage `json:"metadata"`
}

// parseLine decodes and checks one line. The checks are the cheap ones; the
// server validates the rest (dimension, metadata values, sizes).
func parseLine(text []byte, def compactorv1.Operation) (*compactorv1.OperationRecord, error) {
	var l pushLine
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: unexpected data after the object")
	}
	rec := &compactorv1.OperationRecord{Op: def, Embedding: l.Embedding, Document: l.Document}
	if l.Op != nil {
		op, ok := parseEnum[compactorv1.Operation](*l.Op, "OPERATION_", compactorv1.Operation_value)
		if !ok {
			return nil, fmt.Errorf("op %q: want add, update, upsert or delete", *l.Op)
		}
		rec.Op = op
	}
	switch {
	case l.ID == nil:
		return nil, errors.New(`"id" is missing`)
	case *l.ID == "":
		return nil, errors.New(`"id" is empty`)
	}
	rec.Id = *l.ID
	if len(l.Metadata) > 0 && string(l.Metadata) != "null" {
		var md map[string]any
		if err := json.Unmarshal(l.Metadata, &md); err != nil {
			return nil, errors.New(`"metadata": want an object`)
		}
		st, err := structpb.NewStruct(md)
		if err != nil {
			return nil, fmt.Errorf(`"metadata": %w`, err)
		}
		rec.Metadata = st
	}
	return rec, nil
}

// jsonProblem rewords a decoding error for a person.
func jsonProblem(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("invalid JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: the line ends inside the object")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("want a JSON object, got %s", typ.Value)
		}
		return fmt.Errorf("%q: want %s, got %s", typ.Field, kindText(typ.Type), typ.Value)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func kindText(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(kindText(t.Elem()), "a ") + "s"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
