// Package client is the Go client of compactor's API: the three services of
// package compactorv1connect (CompactionService, CollectionService,
// LogService) behind one constructor, a bearer-token option, a wait for
// compaction jobs built on WatchCompactions, and readers of the typed error
// details the server attaches.
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
//
// # Errors
//
// Every error of an RPC is a *connect.Error (WaitJobs wraps it with %w, so
// errors.As and connect.CodeOf still find it); connect.CodeOf(err) gives its
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
