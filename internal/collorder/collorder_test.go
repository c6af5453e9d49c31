package collorder

import (
	"testing"
	"time"
)

func TestAPositionHoldsTheFigureOfItsOrderOnly(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	for _, tc := range []struct {
		sort          string
		lastCompacted time.Time
		want          Cursor
	}{
		{Name, at, Cursor{Name: "c"}},
		{"", at, Cursor{Name: "c"}},
		{"unknown", at, Cursor{Name: "c"}},
		{Backlog, at, Cursor{Value: 7, Name: "c"}},
		{Records, at, Cursor{Value: 42, Name: "c"}},
		{LastCompacted, at, Cursor{Value: 1_700_000_000_123, Name: "c"}},
		{LastCompacted, time.Time{}, Cursor{Name: "c"}},
	} {
		if got := Of(tc.sort, "c", 7, 42, tc.lastCompacted); got != tc.want {
			t.Errorf("Of(%q, last compacted %v) = %+v, want %+v", tc.sort, tc.lastCompacted, got, tc.want)
		}
	}
}
