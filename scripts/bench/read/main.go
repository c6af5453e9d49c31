// Command read times a paged GetRecords read of a whole collection, for
// scripts/bench.sh: it follows pages of -page-size records (Connect, binary
// protobuf) from the first to the last, checks that ids ascend across pages,
// and prints one JSON object:
//
//	{"records": N, "pages": P, "seconds": S, "complete": true}
//
// With -max-time, it stops after the page that crosses that duration and
// prints "complete": false with what it read so far (a read whose cost per
// page grows with the collection can take hours on a large one).
//
//	go run ./scripts/bench/read -addr http://127.0.0.1:7070 -collection ID [-max-time 2m] [-cpuprofile FILE]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"time"

	"connectrpc.com/connect"

	"github.com/compactorhq/compactor/client"
	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(1)
	}
}

type result struct {
	Records  int     `json:"records"`
	Pages    int     `json:"pages"`
	Seconds  float64 `json:"seconds"`
	Complete bool    `json:"complete"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	addr := fs.String("addr", "http://127.0.0.1:7070", "server address")
	collection := fs.String("collection", "", "collection id (required)")
	pageSize := fs.Int("page-size", 1000, "records per page (the server caps it at 1,000)")
	maxTime := fs.Duration("max-time", 0, "stop after this long and report a partial read (0: read everything)")
	cpuProfile := fs.String("cpuprofile", "", "write the client's CPU profile of the read to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *collection == "" {
		return errors.New("-collection is required")
	}
	c := client.New(http.DefaultClient, *addr)
	ctx := context.Background()
	req := &compactorv1.GetRecordsRequest{CollectionId: *collection, PageSize: int32(*pageSize)}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var res result
	last := ""
	start := time.Now()
	for {
		resp, err := c.Collections.GetRecords(ctx, connect.NewRequest(req))
		if err != nil {
			return fmt.Errorf("page %d of collection %s: %w", res.Pages+1, *collection, err)
		}
		res.Pages++
		for _, r := range resp.Msg.GetRecords() {
			if r.GetId() <= last {
				return fmt.Errorf("page %d: id %q does not sort after %q", res.Pages, r.GetId(), last)
			}
			last = r.GetId()
		}
		res.Records += len(resp.Msg.GetRecords())
		req.PageToken = resp.Msg.GetNextPageToken()
		if req.PageToken == "" {
			res.Complete = true
			break
		}
		if *maxTime > 0 && time.Since(start) >= *maxTime {
			break
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(res)
}
