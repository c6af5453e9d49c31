package ctxval

import (
	"context"
	"testing"
)

type name string

type role string

func TestValuesAreKeyedByTheirTypeAndTheLatestWins(t *testing.T) {
	ctx := context.Background()
	if v, ok := From[name](ctx); ok || v != "" {
		t.Fatalf("From on an empty context = %q, %v; want zero, false", v, ok)
	}
	ctx = With(ctx, name("alice"))
	ctx = With(ctx, role("admin"))
	if v, ok := From[name](ctx); !ok || v != "alice" {
		t.Errorf("From[name] = %q, %v; want alice, true", v, ok)
	}
	if v, ok := From[role](ctx); !ok || v != "admin" {
		t.Errorf("From[role] = %q, %v; want admin, true", v, ok)
	}
	if v, ok := From[string](ctx); ok {
		t.Errorf("From[string] = %q, true; a value of another type with the same underlying type must not match", v)
	}
	ctx = With(ctx, name("bob"))
	if v, _ := From[name](ctx); v != "bob" {
		t.Errorf("From[name] after a second With = %q, want bob", v)
	}
}
