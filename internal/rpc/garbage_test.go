package rpc_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

// ok is the "code" of a call expected to succeed.
const ok connect.Code = 0

// TestGarbageRequestsGetCodedErrors: empty messages for every procedure,
// huge and negative page sizes, forged page tokens and out-of-range values
// get the documented code, never INTERNAL or UNKNOWN, and nothing panics
// (the fixture fails the test when the server logs a panic).
func TestGarbageRequestsGetCodedErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	setup := f.clients(protocols[1])
	coll := createCollection(t, setup, "garbage", 2)
	push(t, setup, coll.GetId(), smallRecords(0, 5, 2))
	id := coll.GetId()
	tok := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	manyKeys := map[string]any{}
	for i := range 300 {
		manyKeys[fmt.Sprint("k", i)] = i
	}
	manyKeysMD, _ := structpb.NewStruct(manyKeys)
	emptyKeyMD, _ := structpb.NewStruct(map[string]any{"": "v"})
	bigDoc := strings.Repeat("d", 1<<20+1)
	ids := make([]string, 10_001)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	watchIDs := make([]string, 1_001)
	for i := range watchIDs {
		watchIDs[i] = unknownID(i)
	}
	rec := func(mut func(r *compactorv1.OperationRecord)) []*compactorv1.OperationRecord {
		r := smallRecords(0, 1, 2)[0]
		mut(r)
		return []*compactorv1.OperationRecord{r}
	}

	type call = func(ctx context.Context, c clients) error
	listColls := func(m *compactorv1.ListCollectionsRequest) call {
		return func(ctx context.Context, c clients) error {
			_, err := c.colls.ListCollections(ctx, connect.NewRequest(m))
			return err
		}
	}
	listJobs := func(m *compactorv1.ListCompactionsRequest) call {
		return func(ctx context.Context, c clients) error {
			_, err := c.jobs.ListCompactions(ctx, connect.NewRequest(m))
			return err
		}
	}
	getRecords := func(m *compactorv1.GetRecordsRequest) call {
		return func(ctx context.Context, c clients) error {
			_, err := c.colls.GetRecords(ctx, connect.NewRequest(m))
			return err
		}
	}
	create := func(m *compactorv1.CreateCollectionRequest) call {
		return func(ctx context.Context, c clients) error {
			_, err := c.colls.CreateCollection(ctx, connect.NewRequest(m))
			return err
		}
	}
	pushLogs := func(m *compactorv1.PushLogsRequest) call {
		return func(ctx context.Context, c clients) error {
			_, err := c.logs.PushLogs(ctx, connect.NewRequest(m))
			return err
		}
	}
	// watch returns the stream's error, or nil once SNAPSHOT_COMPLETE
	// arrives.
	watch := func(m *compactorv1.WatchCompactionsRequest) call {
		return func(ctx context.Context, c clients) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := c.jobs.WatchCompactions(ctx, connect.NewRequest(m))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				if stream.Msg().GetType() == compactorv1.WatchEventType_WATCH_EVENT_TYPE_SNAPSHOT_COMPLETE {
					return nil
				}
			}
			if err := stream.Err(); err != nil {
				return err
			}
			return fmt.Errorf("watch ended without SNAPSHOT_COMPLETE")
		}
	}

	cases := []struct {
		name string
		call call
		want connect.Code
	}{
		// Empty messages.
		{"empty Compact", func(ctx context.Context, c clients) error {
			_, err := c.jobs.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"empty GetCompaction", func(ctx context.Context, c clients) error {
			_, err := c.jobs.GetCompaction(ctx, connect.NewRequest(&compactorv1.GetCompactionRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"empty ListCompactions", listJobs(&compactorv1.ListCompactionsRequest{}), ok},
		{"empty WatchCompactions", watch(&compactorv1.WatchCompactionsRequest{}), ok},
		{"empty CancelCompaction", func(ctx context.Context, c clients) error {
			_, err := c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"empty CreateCollection", create(&compactorv1.CreateCollectionRequest{}), connect.CodeInvalidArgument},
		{"empty GetCollection", func(ctx context.Context, c clients) error {
			_, err := c.colls.GetCollection(ctx, connect.NewRequest(&compactorv1.GetCollectionRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"empty ListCollections", listColls(&compactorv1.ListCollectionsRequest{}), ok},
		{"empty DeleteCollection", func(ctx context.Context, c clients) error {
			_, err := c.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{}))
			return err
		}, connect.CodeInvalidArgument},
		{"empty GetRecords", getRecords(&compactorv1.GetRecordsRequest{}), connect.CodeInvalidArgument},
		{"empty PushLogs", pushLogs(&compactorv1.PushLogsRequest{}), connect.CodeInvalidArgument},

		// Page sizes and tokens.
		{"huge page size of collections", listColls(&compactorv1.ListCollectionsRequest{PageSize: math.MaxInt32}), ok},
		{"negative page size of collections", listColls(&compactorv1.ListCollectionsRequest{PageSize: -1}), connect.CodeInvalidArgument},
		{"most negative page size of collections", listColls(&compactorv1.ListCollectionsRequest{PageSize: math.MinInt32}), connect.CodeInvalidArgument},
		{"collections token not base64", listColls(&compactorv1.ListCollectionsRequest{PageToken: "!!not base64!!"}), connect.CodeInvalidArgument},
		{"collections token forged", listColls(&compactorv1.ListCollectionsRequest{PageToken: tok("\x00\xff")}), connect.CodeInvalidArgument},
		{"collections token with its kind", listColls(&compactorv1.ListCollectionsRequest{PageToken: tok("collections:\x00\xff")}), ok},
		{"jobs token given to collections", listColls(&compactorv1.ListCollectionsRequest{PageToken: tok("jobs:1/x")}), connect.CodeInvalidArgument},
		{"huge page size of jobs", listJobs(&compactorv1.ListCompactionsRequest{PageSize: math.MaxInt32}), ok},
		{"negative page size of jobs", listJobs(&compactorv1.ListCompactionsRequest{PageSize: -7}), connect.CodeInvalidArgument},
		{"jobs token not base64", listJobs(&compactorv1.ListCompactionsRequest{PageToken: "%%%"}), connect.CodeInvalidArgument},
		{"jobs token without a slash", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("jobs:12345")}), connect.CodeInvalidArgument},
		{"jobs token without an id", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("12345/")}), connect.CodeInvalidArgument},
		{"jobs token with a bad time", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("yesterday/x")}), connect.CodeInvalidArgument},
		{"jobs token with an overflowing time", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("99999999999999999999/x")}), connect.CodeInvalidArgument},
		{"jobs token with a negative time", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("jobs:-1/x")}), ok},
		{"jobs token with the largest time", listJobs(&compactorv1.ListCompactionsRequest{PageToken: tok("jobs:" + fmt.Sprint(int64(math.MaxInt64)) + "/x")}), ok},
		{"unknown job state", listJobs(&compactorv1.ListCompactionsRequest{States: []compactorv1.JobState{42}}), connect.CodeInvalidArgument},
		{"unspecified job state", listJobs(&compactorv1.ListCompactionsRequest{States: []compactorv1.JobState{0}}), connect.CodeInvalidArgument},
		{"unknown trigger", listJobs(&compactorv1.ListCompactionsRequest{Trigger: 42}), ok},
		{"jobs of a malformed collection id", listJobs(&compactorv1.ListCompactionsRequest{CollectionId: "x"}), connect.CodeInvalidArgument},
		{"huge page size of records", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, PageSize: math.MaxInt32}), ok},
		{"negative page size of records", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, PageSize: -1}), connect.CodeInvalidArgument},
		{"records token not base64", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, PageToken: "***"}), connect.CodeInvalidArgument},
		{"records token forged", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, PageToken: tok("zzz")}), connect.CodeInvalidArgument},
		{"records token with its kind", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, PageToken: tok("records:zzz")}), ok},
		{"records by ids and page", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, Ids: []string{"a"}, PageSize: 5}), connect.CodeInvalidArgument},
		{"records by too many ids", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, Ids: ids}), connect.CodeInvalidArgument},
		{"records by empty ids", getRecords(&compactorv1.GetRecordsRequest{CollectionId: id, Ids: []string{"", ""}}), ok},

		// Out-of-range values.
		{"negative dimension", create(&compactorv1.CreateCollectionRequest{Name: "neg", Dimension: -1}), connect.CodeInvalidArgument},
		{"huge dimension", create(&compactorv1.CreateCollectionRequest{Name: "huge", Dimension: math.MaxInt32}), connect.CodeInvalidArgument},
		{"name with NUL", create(&compactorv1.CreateCollectionRequest{Name: "a\x00b"}), connect.CodeInvalidArgument},
		{"long name", create(&compactorv1.CreateCollectionRequest{Name: strings.Repeat("n", 10_000)}), connect.CodeInvalidArgument},
		{"watch of too many jobs", watch(&compactorv1.WatchCompactionsRequest{JobIds: watchIDs}), connect.CodeInvalidArgument},
		{"watch of an unknown collection", watch(&compactorv1.WatchCompactionsRequest{CollectionId: unknownID(1)}), connect.CodeNotFound},
		{"long record id", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) { r.Id = strings.Repeat("i", 2000) })}), connect.CodeInvalidArgument},
		{"huge document", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) { r.Document = &bigDoc })}), connect.CodeInvalidArgument},
		{"too many metadata keys", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) { r.Metadata = manyKeysMD })}), connect.CodeInvalidArgument},
		{"empty metadata key", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) { r.Metadata = emptyKeyMD })}), connect.CodeInvalidArgument},
		{"empty embedding on UPDATE", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) {
			r.Op, r.Embedding = compactorv1.Operation_OPERATION_UPDATE, []float32{}
		})}), ok},
		{"null metadata value", pushLogs(&compactorv1.PushLogsRequest{CollectionId: id, Records: rec(func(r *compactorv1.OperationRecord) {
			r.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"gone": structpb.NewNullValue()}}
		})}), ok},
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := f.clients(p)
			for _, tc := range cases {
				err := tc.call(t.Context(), c)
				if tc.want == ok {
					if err != nil {
						t.Errorf("%s: %v, want success", tc.name, err)
					}
					continue
				}
				if got := connect.CodeOf(err); err == nil || got != tc.want {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
			}
		})
	}

	t.Run("raw bodies", func(t *testing.T) { testRawBodies(t, f) })
}

// testRawBodies posts malformed bodies to every procedure in the Connect
// and gRPC protocols: each gets a coded error (or, for bytes that happen to
// decode, an answer), never INTERNAL or UNKNOWN.
func testRawBodies(t *testing.T, f *fixture) {
	procedures := []string{
		compactorv1connect.CompactionServiceCompactProcedure,
		compactorv1connect.CompactionServiceGetCompactionProcedure,
		compactorv1connect.CompactionServiceListCompactionsProcedure,
		compactorv1connect.CompactionServiceWatchCompactionsProcedure,
		compactorv1connect.CompactionServiceCancelCompactionProcedure,
		compactorv1connect.CollectionServiceCreateCollectionProcedure,
		compactorv1connect.CollectionServiceGetCollectionProcedure,
		compactorv1connect.CollectionServiceListCollectionsProcedure,
		compactorv1connect.CollectionServiceDeleteCollectionProcedure,
		compactorv1connect.CollectionServiceGetRecordsProcedure,
		compactorv1connect.LogServicePushLogsProcedure,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 300)
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	bodies := []struct {
		name, contentType string
		body              []byte
		// framing: a broken gRPC envelope, which connect-go rejects
		// before any handler runs with INTERNAL, as the gRPC protocol
		// specifies (grpc-go does the same).
		framing bool
	}{
		{"random proto", "application/proto", junk, false},
		{"truncated proto", "application/proto", []byte{0x0a, 0x10, 'a'}, false},
		{"not JSON", "application/json", []byte("not json"), false},
		{"JSON of the wrong shape", "application/json", []byte(`{"page_size": "many", "collection_ids": 7, "records": [{"op": "EXPLODE"}]}`), false},
		{"JSON array", "application/json", []byte(`[1, 2, 3]`), false},
		{"streaming random proto", "application/connect+proto", append([]byte{0, 0, 0, 1, 44}, junk...), false},
		{"gRPC random message", "application/grpc", append([]byte{0, 0, 0, 1, 44}, junk...), false},
		{"gRPC truncated envelope", "application/grpc", []byte{0, 0, 0}, true},
		{"gRPC compressed flag without encoding", "application/grpc", []byte{1, 0, 0, 0, 1, 0}, true},
		{"gRPC length beyond the body", "application/grpc", []byte{0, 0x7f, 0xff, 0xff, 0xff, 1, 2}, false},
		{"gRPC-Web random message", "application/grpc-web+proto", append([]byte{0, 0, 0, 1, 44}, junk...), false},
	}
	for _, proc := range procedures {
		for _, b := range bodies {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+proc, bytes.NewReader(b.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", b.contentType)
			if strings.HasPrefix(b.contentType, "application/grpc") {
				req.Header.Set("TE", "trailers")
			}
			res, err := f.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", proc, b.name, err)
			}
			body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
			res.Body.Close()
			code := rawCode(res, body)
			if b.framing && code == "internal" {
				continue
			}
			if code == "internal" || code == "unknown" || res.StatusCode >= 500 {
				t.Errorf("%s with %s: HTTP %d, code %q, body %q", proc, b.name, res.StatusCode, code, truncateBytes(body))
			}
		}
	}
}

// rawCode is the Connect code of a raw response: the grpc-status trailer or
// header, a gRPC-Web trailer frame, or the "code" of a Connect error body;
// "" when the call succeeded or the body is not an error.
func rawCode(res *http.Response, body []byte) string {
	for _, h := range []http.Header{res.Trailer, res.Header} {
		if s := h.Get("Grpc-Status"); s != "" {
			var n int
			_, _ = fmt.Sscan(s, &n)
			if n == 0 {
				return ""
			}
			return connect.Code(n).String()
		}
	}
	if i := bytes.Index(body, []byte("grpc-status:")); i >= 0 {
		var n int
		_, _ = fmt.Sscan(string(body[i+len("grpc-status:"):]), &n)
		if n == 0 {
			return ""
		}
		return connect.Code(n).String()
	}
	var e struct {
		Code  string `json:"code"`
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	// Unary errors are the JSON body; streaming ones end the stream with
	// an end-of-stream message {"error": {...}} after a 5-byte prefix.
	if json.Unmarshal(body, &e) == nil && e.Code != "" {
		return e.Code
	}
	for i := 0; i+5 <= len(body); {
		n := int(uint32(body[i+1])<<24 | uint32(body[i+2])<<16 | uint32(body[i+3])<<8 | uint32(body[i+4]))
		if i+5+n > len(body) {
			break
		}
		if body[i]&0x02 != 0 && json.Unmarshal(body[i+5:i+5+n], &e) == nil && e.Error != nil {
			return e.Error.Code
		}
		i += 5 + n
	}
	return ""
}

func truncateBytes(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
