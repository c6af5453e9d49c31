// Command watchload opens many WatchCompactions streams against a running
// compactor and prints the server's resident memory (its
// process_resident_memory_bytes metric) before and while they are open:
//
//	go run ./scripts/watchload -addr http://127.0.0.1:7070 -n 2000
//
// Streams the server refuses (RESOURCE_EXHAUSTED beyond --max-watchers) are
// counted, not retried.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"connectrpc.com/connect"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

func main() {
	addr := flag.String("addr", "http://127.0.0.1:7070", "server address")
	n := flag.Int("n", 2000, "watch attempts")
	flag.Parse()
	if err := run(*addr, *n); err != nil {
		fmt.Fprintln(os.Stderr, "watchload:", err)
		os.Exit(1)
	}
}

func run(addr string, n int) error {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	before, err := rss(hc, addr)
	if err != nil {
		return err
	}
	client := compactorv1connect.NewCompactionServiceClient(hc, addr, connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			s, err := client.WatchCompactions(ctx, connect.NewRequest(&compactorv1.WatchCompactionsRequest{}))
			code := "ok"
			if err == nil && !s.Receive() {
				err = s.Err()
			}
			if err != nil {
				code = connect.CodeOf(err).String()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait() // every attempt has its answer; the accepted streams stay open
	after, err := rss(hc, addr)
	if err != nil {
		return err
	}
	fmt.Printf("attempts %d, outcomes %v\nserver RSS before %.1f MB, with the streams open %.1f MB\n",
		n, codes, before/1e6, after/1e6)
	return nil
}

// rss reads process_resident_memory_bytes from /metrics.
func rss(hc *http.Client, addr string) (float64, error) {
	res, err := hc.Get(addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes in %s/metrics", addr)
}
