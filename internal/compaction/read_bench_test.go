package compaction

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/sampletest"
)

// debianRecords is the size of the collection of the paged-read goal of
// docs/performance.md.
const debianRecords = 63_436

// debianOps returns n ADD records made from the Debian sample's base load:
// copy k of package p has id "p~k" (two digits), so the collection holds
// the sample's real documents, metadata and 64-dim embeddings n times over
// with ids that interleave the copies.
func debianOps(tb testing.TB, n int) []materialize.OperationRecord {
	base := sampletest.Base(tb)
	ops := make([]materialize.OperationRecord, 0, n)
	for k := 0; len(ops) < n; k++ {
		for _, op := range base[:min(len(base), n-len(ops))] {
			op.ID = fmt.Sprintf("%s~%02d", op.ID, k)
			ops = append(ops, op)
		}
	}
	return ops
}

// BenchmarkGetRecordsPaged: one paged read of every record of a
// 63,436-record collection made from the Debian sample, 1,000 records a
// page (the CLI's page), with the records all in the uncompacted log tail
// ("tail") and all in the segment after compaction ("segment", with the
// default decoded block cache, warm after the first read; "segment-cold"
// with a new one for each read; "segment-nocache" without one). Setup is
// not timed.
func BenchmarkGetRecordsPaged(b *testing.B) {
	ops := debianOps(b, debianRecords)
	e := newEnv(b, readBenchConfig())
	pushAll(b, e, ops)
	read := func(reader func() *Compactor) func(b *testing.B) {
		return func(b *testing.B) {
			var pages, records int
			cpu0 := cpuTime(b)
			for b.Loop() {
				comp := reader()
				after := ""
				for {
					res, err := comp.ListRecords(e.ctx, e.id, after, 1000)
					if err != nil {
						b.Fatal(err)
					}
					pages++
					records += len(res.Records)
					if res.Next == "" {
						break
					}
					after = res.Next
				}
			}
			if records != b.N*debianRecords {
				b.Fatalf("read %d records in %d reads, want %d each", records, b.N, debianRecords)
			}
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(pages)/float64(b.N), "pages/op")
			b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
		}
	}
	same := func(c *Compactor) func() *Compactor { return func() *Compactor { return c } }
	b.Run("tail", read(same(e.comp)))
	e.compactAll()
	b.Run("segment", read(same(e.comp)))
	if u := uncachedReader(b, e); u != nil {
		b.Run("segment-cold", read(func() *Compactor { return cachedReader(b, e) }))
		b.Run("segment-nocache", read(same(u)))
	}
}

// BenchmarkGetRecordsIDs: one GetRecords of 1,000 random ids (fixed seed)
// of the 63,436-record Debian collection after compaction, every record in
// the segment: "random" reads a new random id set each time, "same" the
// same ids every time (with the default decoded block cache), and
// "random-nocache" and "same-nocache" the same without a cache. Setup is
// not timed.
func BenchmarkGetRecordsIDs(b *testing.B) {
	ops := debianOps(b, debianRecords)
	e := newEnv(b, readBenchConfig())
	pushAll(b, e, ops)
	e.compactAll()
	all := make([]string, len(ops))
	for i, op := range ops {
		all[i] = op.ID
	}
	r := rand.New(rand.NewPCG(20, 1))
	pick := func() []string {
		ids := make([]string, 1000)
		for i := range ids {
			ids[i] = all[r.IntN(len(all))]
		}
		return ids
	}
	read := func(comp *Compactor, next func() []string) func(b *testing.B) {
		return func(b *testing.B) {
			cpu0 := cpuTime(b)
			for b.Loop() {
				res, err := comp.GetRecords(e.ctx, e.id, next())
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Records) == 0 {
					b.Fatal("no records")
				}
			}
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		}
	}
	same := pick()
	b.Run("random", read(e.comp, pick))
	b.Run("same", read(e.comp, func() []string { return same }))
	if u := uncachedReader(b, e); u != nil {
		b.Run("random-nocache", read(u, pick))
		b.Run("same-nocache", read(u, func() []string { return same }))
	}
}

// cpuTime is the CPU time (user and system) the process has used: on a
// machine shared with other work it shows the cost of a benchmark better
// than the elapsed time (the benchmark runs alone in the process).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
