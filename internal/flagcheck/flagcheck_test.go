package flagcheck

import (
	"errors"
	"testing"
	"time"
)

func TestChecksNameTheFlagTheRuleAndTheValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for nil
	}{
		{"a positive int passes", Positive("--workers", 1), ""},
		{"zero is not positive", Positive("--workers", 0), "--workers must be positive, got 0"},
		{"a negative duration prints as a duration", Positive("--interval", -90*time.Second), "--interval must be positive, got -1m30s"},
		{"zero is not negative", NotNegative("--reserve", int64(0)), ""},
		{"a negative size is refused", NotNegative("--reserve", int64(-1)), "--reserve must not be negative, got -1"},
		{"the bound itself passes", AtLeast("--lease", time.Second, time.Second), ""},
		{"under the bound is refused with the bound", AtLeast("--lease", time.Millisecond, time.Second), "--lease must be at least 1s, got 1ms"},
		{"a float under the bound", AtLeast("--fraction", 0.5, 1.0), "--fraction must be at least 1, got 0.5"},
		{"That passes when ok", That(true, "never %d", 1), ""},
		{"That formats when not ok", That(false, "--window-close must be %s or %s, got %q", "finish", "requeue", "x"), `--window-close must be finish or requeue, got "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want == "" && tc.err != nil:
				t.Errorf("got %q, want nil", tc.err)
			case tc.want != "" && (tc.err == nil || tc.err.Error() != tc.want):
				t.Errorf("got %v, want %q", tc.err, tc.want)
			}
		})
	}
}

func TestFirstReturnsTheEarliestFailure(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	if err := First(); err != nil {
		t.Errorf("First() = %v, want nil", err)
	}
	if err := First(nil, nil); err != nil {
		t.Errorf("First(nil, nil) = %v, want nil", err)
	}
	if err := First(nil, a, b); err != a {
		t.Errorf("First(nil, a, b) = %v, want a", err)
	}
}
