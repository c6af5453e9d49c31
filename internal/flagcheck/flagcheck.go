// Package flagcheck builds the errors of the configs' Validate methods
// (CONVENTIONS: config structs have RegisterFlags and Validate, and an
// error names the flag, the rule and the value given):
//
//	--workers must be positive, got 0
//
// Each check returns nil when the value passes; First returns the first
// failure of a list, so that a Validate method lists its checks in order:
//
//	return flagcheck.First(
//		flagcheck.Positive("--workers", c.Workers),
//		flagcheck.That(c.Min <= c.Max, "--min must be at most --max (%d), got %d", c.Max, c.Min),
//	)
//
// The package is a leaf: it imports nothing of the project.
package flagcheck

import "fmt"

// Number is what the checks compare: integers, durations and sizes of any
// integer type, floats.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 |
		~float32 | ~float64
}

// Positive is nil when v > 0, else "FLAG must be positive, got V" (V as
// fmt's %v prints it: a time.Duration as "1m30s").
func Positive[T Number](flag string, v T) error {
	if v > 0 {
		return nil
	}
	return fmt.Errorf("%s must be positive, got %v", flag, v)
}

// NotNegative is nil when v >= 0, else "FLAG must not be negative, got V".
func NotNegative[T Number](flag string, v T) error {
	if v >= 0 {
		return nil
	}
	return fmt.Errorf("%s must not be negative, got %v", flag, v)
}

// AtLeast is nil when v >= least, else "FLAG must be at least LEAST, got V".
func AtLeast[T Number](flag string, v, least T) error {
	if v >= least {
		return nil
	}
	return fmt.Errorf("%s must be at least %v, got %v", flag, least, v)
}

// That is nil when ok, else the error fmt.Errorf(format, args...): the
// rules the other checks do not cover.
func That(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// First returns the first non-nil error of errs, nil when there is none.
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
