// Package ctxval carries request-scoped values in a context.Context, one
// per type, keyed by the type itself: a package that attaches a value (the
// audit actor, the authenticated principal) declares no key type and makes
// no type assertion of its own, and two packages' values cannot collide.
//
// The package is a leaf: it imports nothing of the project.
package ctxval

import "context"

// key is the context key of the value of type T.
type key[T any] struct{}

// With returns ctx carrying v, in place of any T ctx carried before.
func With[T any](ctx context.Context, v T) context.Context {
	return context.WithValue(ctx, key[T]{}, v)
}

// From returns the T ctx carries, and false (with T's zero value) when it
// carries none.
func From[T any](ctx context.Context) (T, bool) {
	v, ok := ctx.Value(key[T]{}).(T)
	return v, ok
}
