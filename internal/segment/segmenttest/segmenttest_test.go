package segmenttest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/clock"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

func TestFaultyBlobsFailsExactlyTheNthPut(t *testing.T) {
	ctx := context.Background()
	mem := segmenttest.NewMem(t)
	f := segmenttest.NewFaulty(mem)
	f.FailPutAt = 3
	var failed []int
	for i := 1; i <= 5; i++ {
		err := f.Put(ctx, fmt.Sprintf("k%d", i), []byte("x"))
		if err != nil {
			if !errors.Is(err, segmenttest.ErrInjected) {
				t.Errorf("put %d: %v, want ErrInjected", i, err)
			}
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{3}) {
		t.Errorf("failed puts %v, want [3]", failed)
	}
	if _, err := mem.Get(ctx, "k3"); !errors.Is(err, segment.ErrNotExist) {
		t.Errorf("the failed put wrote: %v", err)
	}
	if got := f.PutKeys(); !slices.Equal(got, []string{"k1", "k2", "k4", "k5"}) || f.Puts() != 5 {
		t.Errorf("puts %d, stored %v", f.Puts(), got)
	}

	// Reset restarts the count; a set error is returned as is.
	custom := errors.New("disk full")
	f.Reset()
	f.FailPutAt, f.Err = 1, custom
	if err := f.Put(ctx, "k6", nil); err != custom {
		t.Errorf("put after reset: %v, want %v", err, custom)
	}
	if err := f.Put(ctx, "k7", nil); err != nil {
		t.Errorf("second put after reset: %v", err)
	}
	if err := f.Delete(ctx, "k7"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if f.Puts() != 2 || f.Deletes() != 1 || f.Gets() != 1 {
		t.Errorf("counts: %d puts, %d deletes, %d gets", f.Puts(), f.Deletes(), f.Gets())
	}
}

func TestFaultyBlobsIsSafeForConcurrentUse(t *testing.T) {
	f := segmenttest.NewFaulty(segmenttest.NewMem(t))
	f.FailPutAt = 50
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			errs <- f.Put(context.Background(), fmt.Sprintf("k%03d", i), nil)
			_ = f.Delete(context.Background(), "none")
		})
	}
	wg.Wait()
	close(errs)
	failures := 0
	for err := range errs {
		if err != nil {
			failures++
		}
	}
	if failures != 1 || f.Puts() != 100 || f.Deletes() != 100 || len(f.PutKeys()) != 99 {
		t.Errorf("%d failures, %d puts, %d deletes, %d stored", failures, f.Puts(), f.Deletes(), len(f.PutKeys()))
	}
}

func TestFaultyBlobsHoldsPutsUntilReleased(t *testing.T) {
	hold := make(chan struct{})
	entered := make(chan struct{})
	f := &segmenttest.FaultyBlobs{Blobs: segmenttest.NewMem(t), Hold: hold, BeforePut: func(int, string) { close(entered) }}
	done := make(chan error)
	go func() { done <- f.Put(context.Background(), "k", []byte("v")) }()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("put returned before release: %v", err)
	default:
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, err := f.Get(context.Background(), "k"); err != nil || string(got) != "v" {
		t.Errorf("get: %q, %v", got, err)
	}
}

func TestClockedReportsPutTimes(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := segmenttest.NewClocked(segmenttest.NewMem(t), fake.Now)
	ctx := context.Background()
	if err := c.Put(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Hour)
	if err := c.Put(ctx, "b", nil); err != nil {
		t.Fatal(err)
	}
	infos, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || !infos[0].ModTime.Equal(fake.Now().Add(-time.Hour)) || !infos[1].ModTime.Equal(fake.Now()) {
		t.Errorf("list: %+v", infos)
	}
}
