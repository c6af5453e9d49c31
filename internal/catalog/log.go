package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// insertChunk is the number of log rows one prepared INSERT writes (5
// parameters per row, well below both SQLite's and PostgreSQL's limits).
const insertChunk = 128

// MaxPushKeyBytes is the longest idempotency key of a push, in bytes.
const MaxPushKeyBytes = 128

// DefaultKeyWindow is how long an idempotency key is kept when
// AppendLimits.KeyWindow is 0.
const DefaultKeyWindow = 24 * time.Hour

// ValidatePushKey checks an idempotency key: 1..MaxPushKeyBytes bytes of
// valid UTF-8 without control or format characters. Errors match
// ErrInvalidArgument.
func ValidatePushKey(key string) error {
	if key == "" {
		return fmt.Errorf("idempotency key is empty: %w", ErrInvalidArgument)
	}
	return checkText("idempotency key", key, MaxPushKeyBytes)
}

// AppendLog validates ops (materialize.Validate against the collection's
// dimension) and appends them to the collection's log in one transaction,
// assigning consecutive offsets. It fixes the collection's dimension on the
// first write that carries an embedding. It returns the first and last offset
// written. Errors: ErrNotFound (no such collection), an
// *materialize.InvalidRecordError (nothing appended), *BackpressureError
// (nothing appended), ErrInvalidArgument for an empty batch.
func (c *Catalog) AppendLog(ctx context.Context, collectionID string, ops []materialize.OperationRecord, lim AppendLimits) (first, last int64, err error) {
	first, last, _, err = c.AppendLogKeyed(ctx, collectionID, "", ops, lim)
	return first, last, err
}

// AppendLogKeyed is AppendLog with an idempotency key (client-chosen, per
// collection; key "" is AppendLog). The key is looked up in the append's
// transaction, before the backlog and validation against the dimension:
// when the collection has the key from the last lim.KeyWindow with the same
// batch (same SHA-256 of the encoded records), nothing is written and the
// offsets first given are returned with replayed true; with a different
// batch it is a *KeyReuseError (matches ErrInvalidArgument). Otherwise the
// batch is appended and the key recorded with its offsets. Keys older than
// the window are purged by the next keyed append to the collection. Errors
// are AppendLog's, and ErrInvalidArgument for a key ValidatePushKey refuses.
func (c *Catalog) AppendLogKeyed(ctx context.Context, id, key string, ops []materialize.OperationRecord, lim AppendLimits) (first, last int64, replayed bool, err error) {
	if len(ops) == 0 {
		return 0, 0, false, fmt.Errorf("append log to collection %s: empty batch: %w", id, ErrInvalidArgument)
	}
	if lim.MaxBacklog < 0 {
		return 0, 0, false, fmt.Errorf("append log to collection %s: negative backlog limit %d: %w", id, lim.MaxBacklog, ErrInvalidArgument)
	}
	if lim.KeyWindow < 0 {
		return 0, 0, false, fmt.Errorf("append log to collection %s: negative idempotency key window %s: %w", id, lim.KeyWindow, ErrInvalidArgument)
	}
	if key != "" {
		if err := ValidatePushKey(key); err != nil {
			return 0, 0, false, fmt.Errorf("append log to collection %s: %w", id, err)
		}
	}
	window := lim.KeyWindow
	if window == 0 {
		window = DefaultKeyWindow
	}

	// Validate and encode before taking the write lock, against the
	// dimension read now. The dimension only ever changes from 0 (unset) to
	// its final value, so the transaction validates again only if it saw
	// that change happen in between.
	var dim0 int
	err = c.r.QueryRowContext(ctx, c.d.q(`SELECT dimension FROM collections WHERE id = ?`), id).Scan(&dim0)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return 0, 0, false, c.wrap(err, "append log to collection %s", id)
	}
	rlim := lim.Record
	rlim.Dimension = dim0
	batchDim, err := materialize.Validate(ops, rlim)
	if err != nil {
		return 0, 0, false, err
	}
	records := make([][]byte, len(ops))
	for i := range ops {
		b, err := ops[i].MarshalBinary()
		if err != nil {
			return 0, 0, false, fmt.Errorf("append log to collection %s: encode record %d: %v: %w", id, i, err, ErrInvalidArgument)
		}
		records[i] = b
	}
	var sum []byte
	if key != "" {
		sum = batchSHA256(records)
	}

	appendedAt := ms(c.now())
	err = c.writeTx(ctx, func(tx *sql.Tx) error {
		var dim int
		var pos, off int64
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT dimension, log_position, compaction_offset FROM collections WHERE id = ?`+c.d.forUpdate), id).
			Scan(&dim, &pos, &off)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if key != "" {
			// Checked before the backlog and the dimension: a retry of a
			// batch that was appended answers as the first try did.
			f, l, found, err := c.lookupPushKey(ctx, tx, id, key, sum, appendedAt-window.Milliseconds())
			if err != nil || found {
				first, last, replayed = f, l, found
				return err
			}
		}
		if dim != dim0 {
			rlim.Dimension = dim
			if batchDim, err = materialize.Validate(ops, rlim); err != nil {
				return err
			}
		}
		if backlog := pos - off; lim.MaxBacklog > 0 && backlog+int64(len(ops)) > lim.MaxBacklog {
			return &BackpressureError{CollectionID: id, Backlog: backlog, Incoming: len(ops), Limit: lim.MaxBacklog}
		}
		if dim == 0 {
			dim = batchDim
		}
		first, last = pos+1, pos+int64(len(ops))
		if err := c.insertLogRows(ctx, tx, id, first, appendedAt, records); err != nil {
			return err
		}
		// An append to an empty backlog starts it: its first row is the
		// oldest uncompacted one (collectionColumns).
		if _, err := tx.ExecContext(ctx, c.d.q(`UPDATE collections SET log_position = ?, dimension = ?, updated_at = ?, `+oldestKept+`
			WHERE id = ?`),
			last, dim, appendedAt, id); err != nil {
			return err
		}
		if key == "" {
			return nil
		}
		_, err = tx.ExecContext(ctx, c.d.q(`INSERT INTO push_keys (collection_id, push_key, batch_sha256, first_offset, last_offset, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`), id, key, sum, first, last, appendedAt)
		if err != nil {
			return fmt.Errorf("record idempotency key: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, c.wrap(err, "append log to collection %s", id)
	}
	return first, last, replayed, nil
}

// lookupPushKey, inside an append's transaction (which holds the
// collection's row lock), first purges the collection's keys created before
// cutoff (unix ms), then looks key up: found with the offsets it was given
// when the batch's hash matches, a *KeyReuseError when it does not.
func (c *Catalog) lookupPushKey(ctx context.Context, tx *sql.Tx, id, key string, sum []byte, cutoff int64) (first, last int64, found bool, err error) {
	if _, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM push_keys WHERE collection_id = ? AND created_at < ?`), id, cutoff); err != nil {
		return 0, 0, false, fmt.Errorf("purge expired idempotency keys: %w", err)
	}
	var stored []byte
	err = tx.QueryRowContext(ctx, c.d.q(`SELECT batch_sha256, first_offset, last_offset FROM push_keys WHERE collection_id = ? AND push_key = ?`), id, key).
		Scan(&stored, &first, &last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, 0, false, nil
	case err != nil:
		return 0, 0, false, fmt.Errorf("look up idempotency key: %w", err)
	case !bytes.Equal(stored, sum):
		return 0, 0, false, &KeyReuseError{CollectionID: id, Key: key, FirstOffset: first, LastOffset: last}
	}
	return first, last, true, nil
}

// batchSHA256 is the SHA-256 of a batch of encoded records, each prefixed
// with its length (so that no two different batches share an input).
func batchSHA256(records [][]byte) []byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, r := range records {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(r)))])
		h.Write(r)
	}
	return h.Sum(nil)
}

// insertLogRows inserts records at offsets first, first+1, ... through the
// dialect's appendLog. Each row carries its record's id (record_id, read
// from the encoded record by recordIDOf), which indexes the log tail by id
// (see tail.go).
func (c *Catalog) insertLogRows(ctx context.Context, tx *sql.Tx, id string, first, appendedAt int64, records [][]byte) error {
	ids := make([][]byte, len(records))
	for i, r := range records {
		rid, err := recordIDOf(r)
		if err != nil {
			return fmt.Errorf("insert log rows: record at offset %d: %w", first+int64(i), err)
		}
		ids[i] = rid
	}
	if err := c.d.appendLog(ctx, c, tx, logRows{collectionID: id, first: first, appendedAt: appendedAt, records: records, ids: ids}); err != nil {
		return fmt.Errorf("insert log rows: %w", err)
	}
	return nil
}

// logRows are the rows of one log append: records[i], with record id
// ids[i], at offset first+i of the collection.
type logRows struct {
	collectionID      string
	first, appendedAt int64
	records, ids      [][]byte
}

// insertLogRowsMulti inserts rows with prepared multi-row INSERTs of
// insertChunk rows and one for the rest: SQL both dialects accept.
func (c *Catalog) insertLogRowsMulti(ctx context.Context, tx *sql.Tx, rows logRows) error {
	insert := func(n int) (*sql.Stmt, error) {
		var b strings.Builder
		b.WriteString(`INSERT INTO log (collection_id, log_offset, appended_at, record, record_id) VALUES `)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?)")
		}
		return tx.PrepareContext(ctx, c.d.q(b.String()))
	}
	args := make([]any, 0, 5*min(len(rows.records), insertChunk))
	exec := func(stmt *sql.Stmt, from, to int) error {
		args = args[:0]
		for i := from; i < to; i++ {
			args = append(args, rows.collectionID, rows.first+int64(i), rows.appendedAt, rows.records[i], rows.ids[i])
		}
		_, err := stmt.ExecContext(ctx, args...)
		return err
	}
	n := len(rows.records)
	full := n / insertChunk
	if full > 0 {
		stmt, err := insert(insertChunk)
		if err != nil {
			return fmt.Errorf("prepare log insert: %w", err)
		}
		defer stmt.Close()
		for k := range full {
			if err := exec(stmt, k*insertChunk, (k+1)*insertChunk); err != nil {
				return err
			}
		}
	}
	if full*insertChunk < n {
		stmt, err := insert(n - full*insertChunk)
		if err != nil {
			return fmt.Errorf("prepare log insert: %w", err)
		}
		defer stmt.Close()
		if err := exec(stmt, full*insertChunk, n); err != nil {
			return err
		}
	}
	return nil
}

// ReadLog returns the log records of a collection with offsets in
// (after, upTo], ascending, at most limit of them (limit <= 0: no limit).
// Each returned record has its Offset set. Rows at or below the collection's
// compaction offset are never returned: they are compacted, whether or not
// PurgeLog has removed them yet. ErrNotFound when the collection does not
// exist.
func (c *Catalog) ReadLog(ctx context.Context, id string, after, upTo int64, limit int) ([]materialize.OperationRecord, error) {
	ops := []materialize.OperationRecord{}
	_, err := c.ScanLog(ctx, id, after, upTo, limit, func(offset int64, record []byte) error {
		var op materialize.OperationRecord
		if err := op.UnmarshalBinary(record); err != nil {
			return c.wrap(fmt.Errorf("decode log record at offset %d: %w", offset, err), "read log of collection %s", id)
		}
		op.Offset = offset
		ops = append(ops, op)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// ScanLog calls fn, in ascending offset order, for the log rows of a
// collection with offsets in (after, upTo], at most limit of them (limit <=
// 0: no limit), with each row's stored record bytes (the
// materialize.OperationRecord binary encoding). record is valid only during
// the call: fn copies what it keeps. It reads in one read transaction and
// returns the number of rows visited. Rows at or below the collection's
// compaction offset are skipped (compacted; PurgeLog removes them).
// ErrNotFound when the collection
// does not exist; an error of fn ends the scan and is returned as it is.
func (c *Catalog) ScanLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error) {
	return c.scanLog(ctx, id, after, upTo, limit, fn, true)
}

// ScanKeptLog is ScanLog without skipping the rows at or below the
// compaction offset: it visits every log row still stored in (after,
// upTo], compacted or not (the rows that PurgeLog has not removed yet, or
// that the log keeps for older kept versions). The verification's replay
// reads the log slice between two versions with it.
func (c *Catalog) ScanKeptLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error) (int, error) {
	return c.scanLog(ctx, id, after, upTo, limit, fn, false)
}

func (c *Catalog) scanLog(ctx context.Context, id string, after, upTo int64, limit int, fn func(offset int64, record []byte) error, uncompacted bool) (int, error) {
	n := 0
	var fnErr error
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		var compacted int64
		err := tx.QueryRowContext(ctx, c.d.q(`SELECT compaction_offset FROM collections WHERE id = ?`), id).Scan(&compacted)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		query := `SELECT log_offset, record FROM log WHERE collection_id = ? AND log_offset > ? AND log_offset <= ? ORDER BY log_offset`
		if !uncompacted {
			compacted = 0
		}
		args := []any{id, max(after, compacted), upTo}
		if limit > 0 {
			query += ` LIMIT ?`
			args = append(args, limit)
		}
		rows, err := tx.QueryContext(ctx, c.d.q(query), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				offset int64
				record sql.RawBytes
			)
			if err := rows.Scan(&offset, &record); err != nil {
				return err
			}
			n++
			if fnErr = fn(offset, record); fnErr != nil {
				return fnErr
			}
		}
		return rows.Err()
	})
	if fnErr != nil {
		return n, fnErr
	}
	if err != nil {
		return n, c.wrap(err, "read log of collection %s", id)
	}
	return n, nil
}

// logPurgeChunk is how many log rows one transaction of PurgeLog deletes: small
// enough that a write arriving while a chunk runs waits milliseconds, not
// seconds.
const logPurgeChunk = 1_000

// purgeMaxYield is the longest PurgeLog waits before a chunk for the
// foreground writes to pause (see writerGate), so that a steady stream of
// writes slows the purge down without stopping it.
const purgeMaxYield = time.Second

// writerGate lets the log purge yield to foreground writes: writeTx counts
// every write transaction from the moment it asks for the writer until it
// ends, and the purge starts its next chunk only when none is counted (or
// after purgeMaxYield). A small compaction committing behind a large one's
// purge then waits for at most the one chunk in progress, not for the
// purge. It sees the writes of this process only (PostgreSQL replicas do
// not queue on one writer connection). The zero value is ready to use.
type writerGate struct {
	mu   sync.Mutex
	busy int           // foreground write transactions waiting or running
	idle chan struct{} // closed when busy drops to 0; nil while busy is 0
	// trace, when set (tests), is called under mu with "enter" and
	// "leave" for each foreground write, "yield" when the purge waits for
	// them and "chunk" before each purge chunk.
	trace func(event string)
}

func (g *writerGate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.note("enter")
	if g.busy++; g.idle == nil {
		g.idle = make(chan struct{})
	}
}

func (g *writerGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.note("leave")
	if g.busy--; g.busy == 0 {
		close(g.idle)
		g.idle = nil
	}
}

// note passes event to trace. g.mu is held.
func (g *writerGate) note(event string) {
	if g.trace != nil {
		g.trace(event)
	}
}

// yield returns once no foreground write is counted, maxWait has passed
// or ctx is done (its error).
func (g *writerGate) yield(ctx context.Context, maxWait time.Duration) error {
	var expired <-chan time.Time
	for {
		g.mu.Lock()
		idle := g.idle
		if idle == nil {
			g.note("chunk")
			g.mu.Unlock()
			return nil
		}
		g.note("yield")
		g.mu.Unlock()
		if expired == nil {
			t := time.NewTimer(maxWait)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-idle: // a write may have entered since: look again
		case <-expired:
			g.mu.Lock()
			g.note("chunk")
			g.mu.Unlock()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PurgeLog deletes the log rows of a collection that no kept version needs:
// those at or below the compaction offset of the oldest kept version (the
// lowest compaction offset among the versions GC has not retired, and the
// collection's own), so that a rollback to any kept version finds every
// operation record after it (CommitRollback) — with --versions-to-keep 1,
// that is the current compaction offset. It deletes in transactions of at
// most logPurgeChunk rows (range deletes on the (collection_id, log_offset)
// key) and returns the number of rows deleted. Before each chunk it yields
// to the foreground writes of the catalog (see writerGate): a purge of a
// million rows after a large compaction does not make the small jobs that
// follow wait behind it; after each chunk but the last it rests as long as
// the chunk took (purgeRest), so that it takes at most about half a core.
// It runs after a compaction's commit and after GC retires versions, off
// the commit's critical path: every reader ignores rows at or below the
// current compaction offset (ReadLog, ScanLog and ReadView read above it),
// so rows a crash leaves behind are harmless, and the next purge of the
// collection removes them. ErrNotFound when the
// collection does not exist.
func (c *Catalog) PurgeLog(ctx context.Context, id string) (int64, error) {
	offset, err := c.purgeBound(ctx, id)
	if err != nil {
		return 0, c.wrap(err, "purge log of collection %s", id)
	}
	var lowest sql.NullInt64
	if err := c.r.QueryRowContext(ctx, c.d.q(`SELECT MIN(log_offset) FROM log WHERE collection_id = ?`), id).Scan(&lowest); err != nil {
		return 0, c.wrap(err, "purge log of collection %s", id)
	}
	var total int64
	for lo := lowest.Int64; lowest.Valid && lo <= offset; lo += logPurgeChunk {
		hi := min(lo+logPurgeChunk-1, offset)
		if err := c.writers.yield(ctx, purgeMaxYield); err != nil {
			return total, c.wrap(err, "purge log of collection %s up to offset %d", id, hi)
		}
		began := time.Now()
		// On the writer directly: the purge's own transactions are not
		// foreground writes it would wait for.
		err := c.writeTxOn(ctx, c.w, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, c.d.q(`DELETE FROM log WHERE collection_id = ? AND log_offset >= ? AND log_offset <= ?`), id, lo, hi)
			if err != nil {
				return err
			}
			n, err := rowsAffected(res)
			total += n
			return err
		})
		if err != nil {
			return total, c.wrap(err, "purge log of collection %s up to offset %d", id, hi)
		}
		if hi == offset {
			break
		}
		if err := purgeRest(ctx, time.Since(began)); err != nil {
			return total, c.wrap(err, "purge log of collection %s up to offset %d", id, hi)
		}
	}
	return total, nil
}

// purgeMaxRest bounds the pause after a purge chunk (see purgeRest).
const purgeMaxRest = 100 * time.Millisecond

// purgeRest paces the log purge: after a chunk that took d, it waits as long
// again (at most purgeMaxRest), so that a purge of a million rows uses at
// most about half a core and leaves the other half, and the disk, to the
// foreground work (the small compactions that follow a large one). It
// returns early with ctx's error when ctx ends.
func purgeRest(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(min(d, purgeMaxRest))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// purgeBound is the offset at or below which PurgeLog may delete the log
// rows of collection id: the lowest compaction offset of the collection
// and of its kept versions.
func (c *Catalog) purgeBound(ctx context.Context, id string) (int64, error) {
	var (
		offset int64
		kept   sql.NullInt64
	)
	err := c.r.QueryRowContext(ctx, c.d.q(`SELECT c.compaction_offset,
			(SELECT MIN(v.compaction_offset) FROM versions v WHERE v.collection_id = c.id AND v.retired_at IS NULL)
		FROM collections c WHERE c.id = ?`), id).Scan(&offset, &kept)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	if kept.Valid {
		offset = min(offset, kept.Int64)
	}
	return offset, nil
}

// queryLog runs a query of (log_offset, record) rows and decodes them.
func (c *Catalog) queryLog(ctx context.Context, q querier, query string, args ...any) ([]materialize.OperationRecord, error) {
	rows, err := q.QueryContext(ctx, c.d.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ops := []materialize.OperationRecord{}
	for rows.Next() {
		var (
			offset int64
			record sql.RawBytes
		)
		if err := rows.Scan(&offset, &record); err != nil {
			return nil, err
		}
		var op materialize.OperationRecord
		if err := op.UnmarshalBinary(record); err != nil {
			return nil, fmt.Errorf("decode log record at offset %d: %w", offset, err)
		}
		op.Offset = offset
		ops = append(ops, op)
	}
	return ops, rows.Err()
}

// ReadView returns, from one consistent read transaction, the collection row
// and its uncompacted log tail (offsets after CompactionOffset, ascending).
// It is the snapshot a read path needs. ErrNotFound when no such id.
func (c *Catalog) ReadView(ctx context.Context, id string) (Collection, []materialize.OperationRecord, error) {
	var (
		col Collection
		ops []materialize.OperationRecord
	)
	err := c.readTx(ctx, func(tx *sql.Tx) error {
		var err error
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		ops, err = c.queryLog(ctx, tx, `SELECT log_offset, record FROM log
			WHERE collection_id = ? AND log_offset > ? AND log_offset <= ? ORDER BY log_offset`,
			id, col.CompactionOffset, col.LogPosition)
		return err
	})
	if err != nil {
		return Collection{}, nil, c.wrap(err, "read view of collection %s", id)
	}
	return col, ops, nil
}
