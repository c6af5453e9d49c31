package rpc_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/internal/rpc"
	"github.com/compactorhq/compactor/internal/server"
)

const (
	token      = "s3cret"
	wrongToken = "wr0ng-t0ken"
)

// TestAuthMutatingCallsNeedTheToken: with a token configured, every
// mutating procedure without it or with a wrong one is UNAUTHENTICATED, and
// passes with it; reads and the health check need no token; neither token
// reaches the server log or an error message.
func TestAuthMutatingCallsNeedTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.Token = token }})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			anon, wrong, right := f.clients(p), f.clients(p, withBearer(wrongToken)), f.clients(p, withBearer(token))
			notBearer := f.clients(p, connect.WithInterceptors(headerInterceptor{key: "Authorization", value: "Basic " + token}))

			var collID, jobID string
			type call struct {
				procedure string
				call      func(ctx context.Context, c clients) error
			}
			calls := []call{
				{"CreateCollection", func(ctx context.Context, c clients) error {
					res, err := c.colls.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "auth-" + p.name, Dimension: 2}))
					if err == nil {
						collID = res.Msg.GetCollection().GetId()
					}
					return err
				}},
				{"PushLogs", func(ctx context.Context, c clients) error {
					_, err := c.logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{CollectionId: collID, Records: smallRecords(0, 3, 2)}))
					return err
				}},
				{"Compact", func(ctx context.Context, c clients) error {
					res, err := c.jobs.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{collID}}))
					if err == nil {
						jobID = res.Msg.GetJobs()[0].GetJob().GetId()
					}
					return err
				}},
				{"CancelCompaction", func(ctx context.Context, c clients) error {
					_, err := c.jobs.CancelCompaction(ctx, connect.NewRequest(&compactorv1.CancelCompactionRequest{JobId: jobID}))
					return err
				}},
				{"PauseCompactions", func(ctx context.Context, c clients) error {
					_, err := c.ctl.PauseCompactions(ctx, connect.NewRequest(&compactorv1.PauseCompactionsRequest{CollectionId: collID, Reason: "auth"}))
					return err
				}},
				{"ResumeCompactions", func(ctx context.Context, c clients) error {
					_, err := c.ctl.ResumeCompactions(ctx, connect.NewRequest(&compactorv1.ResumeCompactionsRequest{CollectionId: collID}))
					return err
				}},
				{"UpdateCollectionSettings", func(ctx context.Context, c clients) error {
					_, err := c.ctl.UpdateCollectionSettings(ctx, connect.NewRequest(&compactorv1.UpdateCollectionSettingsRequest{CollectionId: collID, MinCompactionSize: 5}))
					return err
				}},
				{"SetThroughput", func(ctx context.Context, c clients) error {
					_, err := c.ctl.SetThroughput(ctx, connect.NewRequest(&compactorv1.SetThroughputRequest{BytesPerSecond: 1 << 30}))
					return err
				}},
				{"RollbackCollection", func(ctx context.Context, c clients) error {
					_, err := c.colls.RollbackCollection(ctx, connect.NewRequest(&compactorv1.RollbackCollectionRequest{CollectionId: collID, ToVersion: 1}))
					return err
				}},
				{"RebuildIndex", func(ctx context.Context, c clients) error {
					_, err := c.jobs.RebuildIndex(ctx, connect.NewRequest(&compactorv1.RebuildIndexRequest{CollectionId: collID}))
					return err
				}},
				{"VerifyCollection", func(ctx context.Context, c clients) error {
					_, err := c.jobs.VerifyCollection(ctx, connect.NewRequest(&compactorv1.VerifyCollectionRequest{CollectionId: collID}))
					return err
				}},
				{"DeleteCollection", func(ctx context.Context, c clients) error {
					_, err := c.colls.DeleteCollection(ctx, connect.NewRequest(&compactorv1.DeleteCollectionRequest{Id: collID}))
					return err
				}},
			}
			for _, tc := range calls {
				for name, c := range map[string]clients{"no token": anon, "wrong token": wrong, "not a bearer token": notBearer} {
					err := tc.call(t.Context(), c)
					if connect.CodeOf(err) != connect.CodeUnauthenticated {
						t.Fatalf("%s with %s: %v, want UNAUTHENTICATED", tc.procedure, name, err)
					}
					if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), wrongToken) {
						t.Errorf("%s: the error %q shows a token", tc.procedure, err)
					}
				}
				err := tc.call(t.Context(), right)
				switch {
				case tc.procedure == "CancelCompaction" && connect.CodeOf(err) == connect.CodeFailedPrecondition:
					// The job finished first: authenticated all the same.
				case tc.procedure == "RollbackCollection" && slices.Contains([]connect.Code{connect.CodeNotFound, connect.CodeInvalidArgument, connect.CodeFailedPrecondition}, connect.CodeOf(err)):
					// Version 1 is current, not there yet, or a job runs:
					// the call got past authentication all the same.
				case tc.procedure == "VerifyCollection" && connect.CodeOf(err) == connect.CodeFailedPrecondition:
					// Nothing compacted yet: authenticated all the same.
				case err != nil:
					t.Fatalf("%s with the token: %v", tc.procedure, err)
				}
			}
			// The table covers every mutating procedure.
			mutating := rpc.MutatingProcedures()
			if len(mutating) != len(calls) {
				t.Errorf("%d mutating procedures, %d tested", len(mutating), len(calls))
			}
			for _, proc := range mutating {
				if !slices.ContainsFunc(calls, func(tc call) bool { return strings.HasSuffix(proc, "/"+tc.procedure) }) {
					t.Errorf("mutating procedure %s is not tested", proc)
				}
			}

			// The scheme is case-insensitive.
			lower := f.clients(p, connect.WithInterceptors(headerInterceptor{key: "Authorization", value: "bearer " + token}))
			if _, err := lower.colls.CreateCollection(t.Context(), connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "auth-lower-" + p.name})); err != nil {
				t.Errorf("CreateCollection with a lower-case bearer scheme: %v", err)
			}

			// Reads need no token.
			if _, err := anon.colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
				t.Errorf("ListCollections without a token: %v", err)
			}
			if _, err := anon.jobs.ListCompactions(t.Context(), connect.NewRequest(&compactorv1.ListCompactionsRequest{})); err != nil {
				t.Errorf("ListCompactions without a token: %v", err)
			}
			checkHealth(t, f, p)
		})
	}
	wantNoToken(t, f)
}

// TestAuthProtectReads: with protect-reads, reads need the token too; the
// health check still does not.
func TestAuthProtectReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{configure: func(cfg *server.Config) { cfg.Token, cfg.ProtectReads = token, true }})
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			for name, c := range map[string]clients{"no token": f.clients(p), "wrong token": f.clients(p, withBearer(wrongToken))} {
				_, err := c.colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{}))
				wantCode(t, err, connect.CodeUnauthenticated)
				_, err = c.jobs.GetCompaction(t.Context(), connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: unknownID(1)}))
				wantCode(t, err, connect.CodeUnauthenticated)
				stream, err := c.jobs.WatchCompactions(t.Context(), connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
				if err == nil {
					for stream.Receive() {
						t.Errorf("watch with %s: %v", name, stream.Msg())
					}
					err = stream.Err()
					_ = stream.Close()
				}
				wantCode(t, err, connect.CodeUnauthenticated)
			}
			right := f.clients(p, withBearer(token))
			if _, err := right.colls.ListCollections(t.Context(), connect.NewRequest(&compactorv1.ListCollectionsRequest{})); err != nil {
				t.Errorf("ListCollections with the token: %v", err)
			}
			_, err := right.jobs.GetCompaction(t.Context(), connect.NewRequest(&compactorv1.GetCompactionRequest{JobId: unknownID(1)}))
			wantCode(t, err, connect.CodeNotFound)
			checkHealth(t, f, p)
		})
	}
	wantNoToken(t, f)
}

// checkHealth asks grpc.health.v1 without a token: the server and each
// service are SERVING.
func checkHealth(t *testing.T, f *fixture, p protocol) {
	t.Helper()
	hc := grpchealth.NewClient(f.srv.Client(), f.srv.URL, p.opts...)
	for _, svc := range append([]string{""}, rpc.ServiceNames...) {
		res, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health check of %q without a token: %v", svc, err)
		}
		if res.Status != grpchealth.StatusServing {
			t.Errorf("health of %q: %v, want SERVING", svc, res.Status)
		}
	}
	_, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: "no.such.Service"})
	wantCode(t, err, connect.CodeNotFound)
}

func wantNoToken(t *testing.T, f *fixture) {
	t.Helper()
	logs := f.logs.String()
	if logs == "" {
		t.Fatal("the server logged nothing: the capture is broken")
	}
	for _, tok := range []string{token, wrongToken} {
		if strings.Contains(logs, tok) {
			t.Errorf("the server log contains the token %q:\n%s", tok, logs)
		}
	}
}
