package catalog_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/compactorhq/compactor/internal/catalog"
)

// BenchmarkPushLogsCopy measures the PostgreSQL log append against the
// floor of the same rows written by a raw COPY (pgx CopyFrom) into the same
// table, in one run, interleaved: each iteration appends one batch of ADD
// records (128-dim embeddings, a document and metadata) to one collection
// with AppendLogKeyed, keyed as `compactor push` keys its batches, and
// copies the same rows (the encoded records and their record ids, encoded
// before the clock starts) into the log of another collection of the same
// catalog, in one COPY; the order of the two alternates between iterations.
// It reports records/s of each and their ratio (goal: push/copy ≥ 0.5, see
// docs/performance.md). The append's figure includes what a PushLogs call
// costs the catalog: the validation, the encoding, the row lock, the
// idempotency key and the commit; the RPC's decoding is not in it.
//
// Needs COMPACTOR_TEST_POSTGRES_DSN; COMPACTOR_BENCH_PUSH_BATCH sets the
// records per batch (default 1000, the CLI's --batch default).
func BenchmarkPushLogsCopy(b *testing.B) {
	base := postgresBase()
	if base == "" {
		b.Skip("COMPACTOR_TEST_POSTGRES_DSN is not set: PushLogs is measured against a PostgreSQL COPY")
	}
	batch := 1000
	if s := os.Getenv("COMPACTOR_BENCH_PUSH_BATCH"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("COMPACTOR_BENCH_PUSH_BATCH=%q: want a positive number of records", s)
		}
		batch = n
	}
	const dim = 128
	e := &env{backend: "postgres", driver: "postgres", dsn: postgresSchema(b, base), clock: newClock()}
	c := e.open(b)
	pushed := mustCreate(b, c, "pushed", dim)
	copied := mustCreate(b, c, "copied", dim)
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		b.Fatalf("connect for COPY: %v", err)
	}
	defer conn.Close(ctx)
	columns := []string{"collection_id", "log_offset", "appended_at", "record", "record_id"}
	appendedAt := e.clock.Now().UnixMilli()

	var pushTime, copyTime time.Duration
	rows, next := 0, int64(1)
	for i := 0; b.Loop(); i++ {
		ops := adds(fmt.Sprintf("b%06d", i), batch, dim)
		copyRows := make([][]any, len(ops))
		for j := range ops {
			rec, err := ops[j].MarshalBinary()
			if err != nil {
				b.Fatal(err)
			}
			copyRows[j] = []any{copied.ID, next + int64(j), appendedAt, rec, []byte(ops[j].ID)}
		}
		push := func() {
			t0 := time.Now()
			if _, _, _, err := c.AppendLogKeyed(ctx, pushed.ID, fmt.Sprintf("bench/%d", i), ops, catalog.AppendLimits{}); err != nil {
				b.Fatalf("append batch %d: %v", i, err)
			}
			pushTime += time.Since(t0)
		}
		copyBatch := func() {
			t0 := time.Now()
			n, err := conn.CopyFrom(ctx, pgx.Identifier{"log"}, columns, pgx.CopyFromRows(copyRows))
			if err != nil || n != int64(len(copyRows)) {
				b.Fatalf("copy batch %d: %d rows, %v", i, n, err)
			}
			copyTime += time.Since(t0)
		}
		if i%2 == 0 {
			push()
			copyBatch()
		} else {
			copyBatch()
			push()
		}
		rows += len(ops)
		next += int64(len(ops))
	}
	pushRate := float64(rows) / pushTime.Seconds()
	copyRate := float64(rows) / copyTime.Seconds()
	b.ReportMetric(pushRate, "push-records/s")
	b.ReportMetric(copyRate, "copy-records/s")
	b.ReportMetric(pushRate/copyRate, "push/copy")
}
