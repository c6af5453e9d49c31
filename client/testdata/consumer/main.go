// Command consumer is a program of its own module that uses compactor's Go
// client the way a user would. client/consumer_test.go builds it against the
// repository (a replace directive) and runs it against a server:
//
//	consumer <base-url> <token>
//
// For each protocol (Connect, gRPC, gRPC-Web) it creates a collection,
// pushes records, compacts and waits for the job, then reads the typed
// details of an invalid push and checks that a call without the token is
// refused. It prints one line per step and exits 1 at the first unexpected
// result.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: consumer <base-url> <token>")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(baseURL, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Plaintext HTTP/2 (h2c): what gRPC needs against an http:// server;
	// Connect and gRPC-Web use it too.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}

	for _, proto := range []struct {
		name string
		opt  connect.ClientOption
	}{
		{"connect", connect.WithProtoJSON()},
		{"grpc", connect.WithGRPC()},
		{"grpcweb", connect.WithGRPCWeb()},
	} {
		c := client.New(hc, baseURL, proto.opt, client.WithBearerToken(token))
		created, err := c.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
			Name: "consumer-" + proto.name, Dimension: 2,
		}))
		if err != nil {
			return fmt.Errorf("%s: create collection: %w", proto.name, err)
		}
		id := created.Msg.GetCollection().GetId()
		pushed, err := c.Logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{
			CollectionId: id,
			Records: []*compactorv1.OperationRecord{
				{Op: compactorv1.Operation_OPERATION_ADD, Id: "a", Embedding: []float32{1, 0}},
				{Op: compactorv1.Operation_OPERATION_ADD, Id: "b", Embedding: []float32{0, 1}},
				{Op: compactorv1.Operation_OPERATION_DELETE, Id: "a"},
			},
		}))
		if err != nil {
			return fmt.Errorf("%s: push: %w", proto.name, err)
		}
		res, err := c.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{CollectionIds: []string{id}}))
		if err != nil {
			return fmt.Errorf("%s: compact: %w", proto.name, err)
		}
		job, err := c.WaitJob(ctx, res.Msg.GetJobs()[0].GetJob().GetId())
		if err != nil {
			return fmt.Errorf("%s: wait: %w", proto.name, err)
		}
		fmt.Printf("%s: pushed %d, %s, read %d, wrote %d, version %d\n", proto.name, pushed.Msg.GetCount(),
			job.GetState(), job.GetRecordsRead(), job.GetRecordsWritten(), job.GetVersionAfter())

		_, err = c.Logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{
			CollectionId: id,
			Records:      []*compactorv1.OperationRecord{{Op: compactorv1.Operation_OPERATION_ADD, Id: "c", Embedding: []float32{1, 2, 3}}},
		}))
		vs := client.FieldViolations(err)
		if len(vs) == 0 {
			return fmt.Errorf("%s: push of a wrong dimension: want a BadRequest detail, got %v", proto.name, err)
		}
		fmt.Printf("%s: %s, field %s\n", proto.name, connect.CodeOf(err), vs[0].GetField())

		anonymous := client.New(hc, baseURL, proto.opt)
		_, err = anonymous.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{All: true}))
		fmt.Printf("%s: without the token: %s\n", proto.name, connect.CodeOf(err))
	}
	return nil
}
