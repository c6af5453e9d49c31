package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"connectrpc.com/connect"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

// The examples call a compactor server that this package's tests start in
// process on a free port (baseURL), with --token example-token (token) and
// --max-backlog 10. Against your own server, baseURL is its address, such as
// "http://127.0.0.1:7070".

// A program that writes records, compacts the collection and waits for the
// job to finish.
func Example() {
	ctx := context.Background()
	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))

	created, err := c.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
		Name: "example", Dimension: 2,
	}))
	if err != nil {
		log.Fatal(err)
	}
	coll := created.Msg.GetCollection()
	_, err = c.Logs.PushLogs(ctx, connect.NewRequest(&compactorv1.PushLogsRequest{
		CollectionId: coll.GetId(),
		Records: []*compactorv1.OperationRecord{
			{Op: compactorv1.Operation_OPERATION_ADD, Id: "a", Embedding: []float32{1, 0}},
			{Op: compactorv1.Operation_OPERATION_ADD, Id: "b", Embedding: []float32{0, 1}},
		},
	}))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{
		CollectionIds: []string{coll.GetId()}, Reason: "example",
	}))
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.WaitJob(ctx, res.Msg.GetJobs()[0].GetJob().GetId())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d records written, segment version %d\n", job.GetState(), job.GetRecordsWritten(), job.GetVersionAfter())
	// Output: JOB_STATE_SUCCEEDED: 2 records written, segment version 1
}

// Calls that change state need the server's bearer token.
func ExampleWithBearerToken() {
	ctx := context.Background()
	req := &compactorv1.CreateCollectionRequest{Name: "example-token"}

	anonymous := client.New(http.DefaultClient, baseURL)
	_, err := anonymous.Collections.CreateCollection(ctx, connect.NewRequest(req))
	fmt.Println("without the token:", connect.CodeOf(err))

	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))
	_, err = c.Collections.CreateCollection(ctx, connect.NewRequest(req))
	fmt.Println("with the token:", err == nil)
	// Output:
	// without the token: unauthenticated
	// with the token: true
}

// Compact all collections, then wait for every job it returned.
func ExampleClient_WaitJobs() {
	ctx := context.Background()
	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))

	res, err := c.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{All: true}))
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for _, r := range res.Msg.GetJobs() {
		ids = append(ids, r.GetJob().GetId())
	}
	jobs, err := c.WaitJobs(ctx, ids...)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		if j.GetState() != compactorv1.JobState_JOB_STATE_SUCCEEDED {
			fmt.Printf("%s: %s %s\n", j.GetCollectionName(), j.GetState(), j.GetError())
		}
	}
	fmt.Println("every job finished:", len(jobs) == len(ids))
	// Output: every job finished: true
}

// An INVALID_ARGUMENT error names each invalid field in a
// google.rpc.BadRequest detail.
func ExampleFieldViolations() {
	ctx := context.Background()
	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))

	_, err := c.Compactions.Compact(ctx, connect.NewRequest(&compactorv1.CompactRequest{
		CollectionIds: []string{"not-a-uuid"},
	}))
	fmt.Println(connect.CodeOf(err))
	for _, v := range client.FieldViolations(err) {
		fmt.Printf("%s: %s\n", v.GetField(), v.GetDescription())
	}
	// Output:
	// invalid_argument
	// collection_ids[0]: "not-a-uuid" is not a valid id (a UUID such as 0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c)
}

// A push refused because the collection's backlog is at the server's limit
// carries a google.rpc.ErrorInfo that says whether waiting for a compaction
// can help.
func ExampleErrorInfo() {
	ctx := context.Background()
	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))

	created, err := c.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{Name: "example-backlog"}))
	if err != nil {
		log.Fatal(err)
	}
	push := func(n int) error {
		req := &compactorv1.PushLogsRequest{CollectionId: created.Msg.GetCollection().GetId()}
		for i := range n {
			req.Records = append(req.Records, &compactorv1.OperationRecord{
				Op: compactorv1.Operation_OPERATION_DELETE, Id: fmt.Sprint("r", i),
			})
		}
		_, err := c.Logs.PushLogs(ctx, connect.NewRequest(req))
		return err
	}
	for _, n := range []int{8, 5, 20} { // the server's limit is 10 records
		err := push(n)
		if info := client.ErrorInfo(err); info != nil {
			fmt.Printf("%d records: %s, %s (backlog %s, limit %s)\n", n, connect.CodeOf(err), info.GetReason(),
				info.GetMetadata()["backlog"], info.GetMetadata()["limit"])
			continue
		}
		fmt.Printf("%d records: %v\n", n, err)
	}
	// Output:
	// 8 records: <nil>
	// 5 records: resource_exhausted, BACKLOG_LIMIT (backlog 8, limit 10)
	// 20 records: resource_exhausted, BATCH_OVER_BACKLOG_LIMIT (backlog 8, limit 10)
}

// Push records in batches: each batch carries an idempotency key, so a
// retry after a lost answer appends nothing twice; a rejected record stops
// the push with an InvalidRecordError, after the records before it.
func ExampleClient_Push() {
	ctx := context.Background()
	c := client.New(http.DefaultClient, baseURL, client.WithBearerToken(token))
	created, err := c.Collections.CreateCollection(ctx, connect.NewRequest(&compactorv1.CreateCollectionRequest{
		Name: "example-push", Dimension: 2,
	}))
	if err != nil {
		log.Fatal(err)
	}
	recs := []*compactorv1.OperationRecord{
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "a", Embedding: []float32{1, 0}},
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "b", Embedding: []float32{0, 1}},
		{Op: compactorv1.Operation_OPERATION_ADD, Id: "c", Embedding: []float32{1, 1, 1}}, // wrong dimension
	}
	res, err := c.Push(ctx, created.Msg.GetCollection().GetId(), recs, client.PushOptions{BatchSize: 2})
	var bad *client.InvalidRecordError
	if errors.As(err, &bad) {
		fmt.Printf("record %d (%s) rejected: %s\n", bad.Index, bad.Record.GetId(), bad.Record.GetField())
	}
	fmt.Printf("%d records appended in %d batches\n", res.Records, res.Batches)
	// Output:
	// record 2 (c) rejected: embedding
	// 2 records appended in 1 batches
}
