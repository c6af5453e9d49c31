// Package client is the Go client of compactor's API: the five services of
// package compactorv1connect (CompactionService, CollectionService,
// LogService, ControlService, AuditService) behind one constructor, a bearer-token
// option, batched pushes with idempotency keys and retries (Push, Pusher),
// a reconnecting watch of compaction jobs and a wait built on it (Watch,
// Wait, WaitJobs), and readers of the typed error details the server
// attaches (ErrorDetail, Reason, InvalidRecord, FieldViolations,
// ErrorInfo). The compactor CLI is built on it: what the CLI does, a
// program can do with this package.
//
// # Import paths
//
// The generated code has stable import paths, covered by the API's
// compatibility rules (buf breaking runs on every change of proto/):
//
//	github.com/compactorhq/compactor/gen/compactor/v1                    // messages: compactorv1
//	github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect // clients and handlers
//	github.com/compactorhq/compactor/client                              // this package
//
// Get them with
//
//	go get github.com/compactorhq/compactor@latest
//
// The module needs Go 1.26 and uses only released versions of
// google.golang.org/protobuf and connectrpc.com/connect, so it does not move
// a program's go line past 1.26.0 nor its protobuf runtime to a pre-release.
//
// # Protocols
//
// A Client speaks the Connect protocol by default, over HTTP/1.1 or HTTP/2;
// pass connect.WithGRPC() or connect.WithGRPCWeb() to New for the others.
// gRPC needs HTTP/2: over https:// http.DefaultClient negotiates it; over
// plaintext http:// (the server's default) give New an *http.Client whose
// transport speaks unencrypted HTTP/2:
//
//	var p http.Protocols
//	p.SetUnencryptedHTTP2(true)
//	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
//	c := client.New(hc, "http://127.0.0.1:7070", connect.WithGRPC())
//
// # Authentication
//
// A server started with --token requires "Authorization: Bearer <token>" on
// every call that changes state (Compact, CancelCompaction,
// CreateCollection, DeleteCollection, PushLogs), and on reads too with
// --protect-reads; without it a call fails with connect.CodeUnauthenticated.
// WithBearerToken sends the header on every call, unary and streaming.
// (Tools that discover the API by gRPC reflection need the header on their
// reflection calls too against a --protect-reads server: buf curl
// --reflect-header 'Authorization: Bearer TOKEN' beside -H, grpcurl
// -reflect-header.)
//
// # Pushing
//
// Push appends a slice of operation records in batches (1,000 records by
// default, at most MaxPushBatch); a Pusher does the same for batches the
// caller cuts, for example while reading a file. Each batch carries an
// idempotency key "RUN/N", and a batch the server refuses for backpressure
// (RESOURCE_EXHAUSTED, reason BACKLOG_LIMIT) or whose answer is lost
// (UNAVAILABLE, or a CallTimeout that passed) is retried with the same
// key, with exponential backoff: the server answers a retry of a batch it
// has already appended from the key (PushLogsResponse.Replayed), so no
// record is appended twice. A record the server rejects stops the push
// with an *InvalidRecordError: every record before it is appended.
//
// # Errors
//
// Every error of an RPC is a *connect.Error (Wait, Push and Pusher.Send
// wrap it, in a *WaitError, an *InvalidRecordError or with %w, so errors.As
// and connect.CodeOf still find it); connect.CodeOf(err) gives its
// code (the proto files list the codes of each procedure). Some errors carry
// typed details: a google.rpc.BadRequest naming each invalid field
// (INVALID_ARGUMENT of PushLogs and Compact) and a google.rpc.ErrorInfo
// (RESOURCE_EXHAUSTED of PushLogs, with Reason ReasonBacklogLimit or
// ReasonBatchOverBacklogLimit). FieldViolations and ErrorInfo read them.
//
// A detail decodes only when its Go type is linked into the program:
// connect.ErrorDetail.Value looks the type up in the protobuf registry, and
// google.rpc.BadRequest and ErrorInfo are registered by
// google.golang.org/genproto/googleapis/rpc/errdetails. This package imports
// errdetails, so a program that imports it decodes them. A program that uses
// only the generated packages must import errdetails itself (a blank import
// is enough), or Value fails with "not found" for every detail.
package client
