package compaction

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
	"github.com/compactorhq/compactor/internal/segment"
)

// BenchmarkPredictedVsActual1M prices one compaction of 1,000,000
// operation records (pushMix: 70 % ADDs, 15 % UPDATEs, 15 % DELETEs,
// 128-dim) into an empty collection, then runs it, and prints the
// prediction beside what the run did. The duration is priced as the
// manager prices it (manager.Price) with the rates of a warm-up
// compaction of 100,000 records on the same machine, as a node measures
// them from its recent jobs. The vector index is off (an HNSW build of
// 600,000 vectors takes long under load; BenchmarkPredictedVsActual1MIndexed
// keeps it). SQLite catalog and file:// blobs in temp dirs, default flags.
// Skipped under -short.
func BenchmarkPredictedVsActual1M(b *testing.B) { benchPredicted(b, 1_000_000, true) }

// BenchmarkPredictedVsActual1MIndexed is BenchmarkPredictedVsActual1M with
// the vector index built.
func BenchmarkPredictedVsActual1MIndexed(b *testing.B) { benchPredicted(b, 1_000_000, false) }

func benchPredicted(b *testing.B, n int, noIndex bool) {
	if testing.Short() {
		b.Skip("1M records: skipped under -short")
	}
	const dim = 128
	for b.Loop() {
		b.StopTimer()
		warm := predictEnv(b, noIndex)
		pushMix(b, warm, rand.New(rand.NewPCG(1, 2)), n/10, dim)
		wres, wdur := timedCompact(b, warm)
		wa := wres.Outcome().Actual
		rates := manager.Rates{Jobs: 1, BytesPerSecond: float64(wa.BytesWritten) / (wdur.Seconds() - wa.IndexSeconds)}
		if wa.IndexSeconds > 0 {
			rates.VectorsPerSecond = float64(wa.VectorsIndexed) / wa.IndexSeconds
		}
		e := predictEnv(b, noIndex)
		pushMix(b, e, rand.New(rand.NewPCG(5, 6)), n, dim)
		estStart := time.Now()
		est, err := e.comp.Estimate(e.ctx, e.id)
		if err != nil {
			b.Fatal(err)
		}
		estDur := time.Since(estStart)
		p := manager.Price(est, rates, 0)
		b.StartTimer()
		res, dur := timedCompact(b, e)
		b.StopTimer()
		printPredicted(p, res, dur)
		fmt.Printf("the estimate took %.1f s (%.1f %% of the compaction); warm-up: %d records in %.1f s\n",
			estDur.Seconds(), 100*estDur.Seconds()/dur.Seconds(), wres.OpRecordsRead, wdur.Seconds())
		b.ReportMetric(dur.Seconds()/p.Seconds, "duration-actual/predicted")
		b.ReportMetric(float64(res.Outcome().Actual.BytesWritten)/float64(p.BytesWritten), "bytes-actual/predicted")
		b.StartTimer()
	}
}

// predictEnv is newFileEnv with the blobs counted, as the binary wires
// them.
func predictEnv(b *testing.B, noIndex bool) *env {
	b.Helper()
	e := newEnv(b, envConfig{maxRecords: DefaultConfig().MaxRecords, batchRecords: DefaultConfig().BatchRecords, noIndex: noIndex})
	blobs, closer, err := segment.OpenBucket(e.ctx, "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { closer.Close() })
	e.seg = segment.NewStore(CountBlobs(blobs), segment.Config{}, e.clock.Now)
	if e.comp, err = New(e.cat, e.seg, DefaultConfig(), nil); err != nil {
		b.Fatal(err)
	}
	return e
}

func timedCompact(b *testing.B, e *env) (Result, time.Duration) {
	b.Helper()
	start := time.Now()
	res, err := e.comp.Compact(e.ctx, e.id, Options{CommitJob: func(Result) *catalog.Job { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	return res, time.Since(start)
}

// printPredicted prints a prediction beside the run's figures.
func printPredicted(p jobtype.Prediction, res Result, dur time.Duration) {
	a := res.Outcome().Actual
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, pred, act float64, unit string) {
		ratio := "-"
		if pred > 0 {
			ratio = fmt.Sprintf("%.2f", act/pred)
		}
		fmt.Fprintf(tw, "%s\t%.0f %s\t%.0f %s\t%s\t\n", name, pred, unit, act, unit, ratio)
	}
	fmt.Fprintf(tw, "figure\tpredicted\tactual\tactual/predicted\t\n")
	row("operation records", float64(p.OpRecords), float64(res.OpRecordsRead), "")
	row("records written", float64(p.RecordsToWrite), float64(res.RecordsWritten), "")
	row("blocks written", float64(p.BlocksToWrite), float64(res.BlocksWritten), "")
	row("bytes written (all blobs)", float64(p.BytesWritten), float64(a.BytesWritten), "B")
	row("bytes of blocks and manifest", float64(p.BytesWritten-p.IndexBytes), float64(res.BytesWritten), "B")
	row("bytes read", float64(p.BytesRead), float64(a.BytesRead), "B")
	row("blob GETs", float64(p.BlobGets), float64(a.BlobGets), "")
	row("blob PUTs", float64(p.BlobPuts), float64(a.BlobPuts), "")
	row("vectors indexed", float64(p.VectorsToInsert), float64(a.VectorsIndexed), "")
	row("duration", p.Seconds, dur.Seconds(), "s")
	tw.Flush()
	fmt.Printf("write amplification predicted %.2f, actual %.2f; basis: %s\n", p.WriteAmplification,
		float64(res.RecordsWritten)/float64(max(res.OpRecordsRead, 1)), p.Basis)
}
