package catalog_test

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/sampletest"
)

// BenchmarkAppendLog appends batches of 5,000 ADD records with 64-dimension
// embeddings, a document and metadata, as PushLogs of a bulk load does.
func BenchmarkAppendLog(b *testing.B) {
	const batch, dim = 5000, 64
	c := catalogtest.Open(b)
	col := mustCreate(b, c, "bench", dim)
	ops := adds("bench", batch, dim)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, _, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
		n += batch
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkScanLog reads 200,000 log rows of 128-dim records in batches of
// 10,000 (as a compaction does), reporting records/s and the CPU seconds
// (user + system) per op, which a busy machine disturbs less than time.
func BenchmarkScanLog(b *testing.B) {
	const n, batch, dim = 200_000, 10_000, 128
	c := catalogtest.Open(b)
	col := mustCreate(b, c, "bench", dim)
	ops := adds("bench", 5000, dim)
	for i := 0; i < n; i += len(ops) {
		for j := range ops {
			ops[j].ID = fmt.Sprintf("id-%09d", i+j)
		}
		if _, _, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{}); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := cpuSeconds()
	rows := 0
	for b.Loop() {
		for after := int64(0); after < n; {
			k, err := c.ScanLog(ctx, col.ID, after, n, batch, func(off int64, rec []byte) error {
				after = off
				return nil
			})
			if err != nil || k == 0 {
				b.Fatal(k, err)
			}
			rows += k
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkLogRowBytes measures what the log rows a kept version needs cost
// the catalog: the Debian sample (5,000 ADD records, 64-dim embeddings,
// documents and metadata) appended to an empty collection, in bytes of
// database per log row (SQLite: the file's pages after a checkpoint, the
// record-id index included; PostgreSQL, with COMPACTOR_TEST_POSTGRES_DSN:
// the log table's total relation size, indexes and TOAST included). Each
// kept version beyond the current one keeps the log rows its compaction
// covered, so a kept version costs (records it compacted) × this.
func BenchmarkLogRowBytes(b *testing.B) {
	ops := sampletest.Base(b)
	backends := map[string]func(b *testing.B) (*catalog.Catalog, func() int64){
		"sqlite": func(b *testing.B) (*catalog.Catalog, func() int64) {
			e := &env{backend: "sqlite", driver: "sqlite", dsn: filepath.Join(b.TempDir(), "catalog.db"), clock: newClock()}
			c := e.open(b)
			db := rawDBTB(b, e)
			return c, func() int64 {
				var pages, size int64
				if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
					b.Fatal(err)
				}
				if err := db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
					b.Fatal(err)
				}
				if err := db.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&size); err != nil {
					b.Fatal(err)
				}
				return pages * size
			}
		},
	}
	if base := postgresBase(); base != "" {
		backends["postgres"] = func(b *testing.B) (*catalog.Catalog, func() int64) {
			e := &env{backend: "postgres", driver: "postgres", dsn: postgresSchema(b, base), clock: newClock()}
			c := e.open(b)
			db := rawDBTB(b, e)
			return c, func() int64 {
				var n int64
				if _, err := db.ExecContext(ctx, `VACUUM ANALYZE log`); err != nil {
					b.Fatal(err)
				}
				if err := db.QueryRowContext(ctx, `SELECT pg_total_relation_size('log')`).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
	}
	for _, name := range []string{"sqlite", "postgres"} {
		open, ok := backends[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			var perRow float64
			for b.Loop() {
				c, size := open(b)
				col := mustCreate(b, c, fmt.Sprintf("rows-%d", time.Now().UnixNano()), 64)
				before := size()
				if _, _, err := c.AppendLog(ctx, col.ID, ops, catalog.AppendLimits{}); err != nil {
					b.Fatal(err)
				}
				perRow = float64(size()-before) / float64(len(ops))
			}
			b.ReportMetric(perRow, "bytes/row")
		})
	}
}

// BenchmarkClaimJob claims and finishes one-off compactions (as `compact
// --all` queues them) from a queue holding one per collection, 1,000 and
// 10,000 of them: the cost of a claim should not grow with the queue (a
// claim that orders the whole queue makes compact --all quadratic). The
// queue is refilled outside the timer when it runs low.
func BenchmarkClaimJob(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("queued=%d", n), func(b *testing.B) {
			c := catalogtest.Open(b)
			ids := make([]string, n)
			for i := range ids {
				ids[i] = mustCreate(b, c, fmt.Sprintf("claim-%06d", i), 2).ID
			}
			fill := func() {
				reqs := make([]catalog.JobRequest, len(ids))
				for i, id := range ids {
					reqs[i] = catalog.JobRequest{CollectionID: id, Trigger: catalog.TriggerOneOff}
				}
				if _, err := c.EnqueueJobs(ctx, []catalog.EnqueueCall{{Requests: reqs}}); err != nil {
					b.Fatal(err)
				}
			}
			fill()
			queued := n
			for b.Loop() {
				if queued < n*9/10 {
					b.StopTimer()
					fill()
					queued = n
					b.StartTimer()
				}
				j, err := c.ClaimJob(ctx, "bench", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				j.State, j.FinishedAt = catalog.JobSucceeded, time.Now()
				if err := c.FinishJob(ctx, "bench", j); err != nil {
					b.Fatal(err)
				}
				queued--
			}
		})
	}
}
