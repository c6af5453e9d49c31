package storetrace

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"

	"github.com/compactorhq/compactor/internal/segment"
)

// Blobs returns b with a span per call: "blob put", "blob get", "blob
// delete" and "blob list", with the key (or prefix) and the bytes moved.
func Blobs(b segment.Blobs) segment.Blobs { return blobs{b: b} }

type blobs struct{ b segment.Blobs }

func (t blobs) Put(ctx context.Context, key string, data []byte) error {
	return call0(ctx, "blob put", func(ctx context.Context) error { return t.b.Put(ctx, key, data) },
		attribute.String("compactor.blob.key", key), attribute.Int("compactor.blob.bytes", len(data)))
}

func (t blobs) Get(ctx context.Context, key string) ([]byte, error) {
	return t.get(ctx, key, func(ctx context.Context) ([]byte, error) { return t.b.Get(ctx, key) })
}

// GetBuffer implements segment.BufferGetter, passing buf to the store.
func (t blobs) GetBuffer(ctx context.Context, key string, buf []byte) ([]byte, error) {
	return t.get(ctx, key, func(ctx context.Context) ([]byte, error) { return segment.GetBuffer(ctx, t.b, key, buf) })
}

func (t blobs) get(ctx context.Context, key string, get func(context.Context) ([]byte, error)) ([]byte, error) {
	ctx, span := start(ctx, "blob get", attribute.String("compactor.blob.key", key))
	data, err := get(ctx)
	if span != nil {
		span.SetAttributes(attribute.Int("compactor.blob.bytes", len(data)))
		if errors.Is(err, segment.ErrNotExist) {
			span.SetAttributes(attribute.Bool("compactor.blob.missing", true))
		}
	}
	if errors.Is(err, segment.ErrNotExist) {
		end(span, nil) // an answer: the caller decides what a missing blob means
	} else {
		end(span, err)
	}
	return data, err
}

func (t blobs) Delete(ctx context.Context, key string) error {
	return call0(ctx, "blob delete", func(ctx context.Context) error { return t.b.Delete(ctx, key) },
		attribute.String("compactor.blob.key", key))
}

func (t blobs) List(ctx context.Context, prefix string) ([]segment.BlobInfo, error) {
	return call(ctx, "blob list", func(ctx context.Context) ([]segment.BlobInfo, error) { return t.b.List(ctx, prefix) },
		attribute.String("compactor.blob.prefix", prefix))
}
