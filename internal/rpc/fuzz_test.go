package rpc

import (
	"context"
	"encoding/base64"
	"log/slog"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
)

// maxEchoedMessage bounds an error message built from client input: the
// fixed text plus at most MaxEchoBytes of each echoed value, quoted.
const maxEchoedMessage = 1024

func FuzzPageToken(f *testing.F) {
	for _, s := range []string{
		"", encodeToken(tokenJobs, "1700000000000/0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c"),
		encodeToken(tokenCollections, "name"), encodeToken(tokenRecords, "id\x00"),
		base64.RawURLEncoding.EncodeToString([]byte("jobs:")), base64.RawURLEncoding.EncodeToString([]byte("jobs:-1/x")),
		base64.RawURLEncoding.EncodeToString([]byte("jobs:99999999999999999999/x")), "!!!", "amo", strings.Repeat("A", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		for _, kind := range []string{tokenJobs, tokenCollections, tokenRecords} {
			cursor, err := decodeToken(kind, tok)
			if err != nil {
				if connect.CodeOf(err) != connect.CodeInvalidArgument || len(err.Error()) > maxEchoedMessage {
					t.Fatalf("decodeToken(%s): %v", kind, err)
				}
				continue
			}
			if tok == "" {
				if cursor != "" {
					t.Fatalf("empty token gave cursor %q", cursor)
				}
				continue
			}
			// Whatever decodes is a cursor this listing could have made.
			if back, err := decodeToken(kind, encodeToken(kind, cursor)); err != nil || back != cursor {
				t.Fatalf("cursor %q does not round-trip: %q, %v", cursor, back, err)
			}
		}
		c, err := decodeJobCursor(tok)
		switch {
		case err != nil:
			if connect.CodeOf(err) != connect.CodeInvalidArgument || len(err.Error()) > maxEchoedMessage {
				t.Fatalf("decodeJobCursor: %v", err)
			}
		case tok != "":
			again, err := decodeJobCursor(encodeJobCursor(catalog.Job{ID: c.ID, CreatedAt: c.CreatedAt}))
			if err != nil || again != c {
				t.Fatalf("job cursor %+v does not round-trip: %+v, %v", c, again, err)
			}
		}
	})
}

// FuzzPushedRecord runs one pushed record (its wire bytes) through what
// PushLogs does: conversion from the proto Struct/Value metadata, then
// materialize.Validate. Validation must never panic, its errors must reach
// the client bounded, and what it accepts must encode into the log and
// read back as a proto record.
func FuzzPushedRecord(f *testing.F) {
	nan := math.NaN()
	doc := "doc"
	for _, r := range []*compactorv1.OperationRecord{
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "a", Embedding: []float32{1, 2}, Document: &doc},
		{Op: compactorv1.Operation_OPERATION_UPSERT, Id: "b", Embedding: []float32{float32(math.Inf(1))}},
		{Op: compactorv1.Operation_OPERATION_UPDATE, Id: "c", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"s": structpb.NewStringValue("v"), "n": structpb.NewNumberValue(nan), "b": structpb.NewBoolValue(true),
			"null": structpb.NewNullValue(), "l": structpb.NewListValue(&structpb.ListValue{}),
			"o": structpb.NewStructValue(&structpb.Struct{}), "empty": {},
		}}},
		{Op: compactorv1.Operation_OPERATION_DELETE, Id: strings.Repeat("x", 2000)},
		{Op: compactorv1.Operation(99), Id: "d"},
		{Id: ""},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if j, err := protojson.Marshal(r); err == nil { // a Value of no kind has no JSON form
			f.Add(j)
		}
	}
	f.Add([]byte(`{"op":"OPERATION_UPSERT","id":"x","embedding":[1],"metadata":{"n":1e308,"s":"\ud800","o":{"a":[1,{"b":null}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The input is tried as both wire formats a client may send.
		var p compactorv1.OperationRecord
		if proto.Unmarshal(data, &p) == nil {
			checkPushedRecord(t, &p)
		}
		p.Reset()
		if protojson.Unmarshal(data, &p) == nil {
			checkPushedRecord(t, &p)
		}
	})
}

// checkPushedRecord is FuzzPushedRecord's property for one decoded record.
func checkPushedRecord(t *testing.T, p *compactorv1.OperationRecord) {
	t.Helper()
	o, err := operationFromProto(0, p)
	if err != nil {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("conversion: %v", err)
		}
		return
	}
	if _, err := materialize.Validate([]materialize.OperationRecord{o}, materialize.Limits{}); err != nil {
		ce := toConnect(context.Background(), slog.New(slog.DiscardHandler), "push", err)
		if connect.CodeOf(ce) != connect.CodeInvalidArgument || len(ce.Error()) > maxEchoedMessage || !utf8.ValidString(ce.Error()) {
			t.Fatalf("validation error reaches the client as %v (%d bytes)", ce, len(ce.Error()))
		}
		return
	}
	b, err := o.MarshalBinary()
	if err != nil {
		t.Fatalf("an accepted record does not encode into the log: %v", err)
	}
	var back materialize.OperationRecord
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatalf("an accepted record does not decode from the log: %v", err)
	}
	if rec := materialize.Apply(nil, []materialize.OperationRecord{back}); rec != nil {
		if _, err := recordToProto(*rec); err != nil {
			t.Fatalf("an accepted record cannot be read back: %v", err)
		}
	}
}
