package cli

import (
	"fmt"
	"strings"
	"testing"
)

type hitJSON struct {
	ID       string         `json:"id"`
	Distance *float64       `json:"distance"`
	Document *string        `json:"document"`
	Metadata map[string]any `json:"metadata"`
}

// TestQuery: collections create takes the distance and index settings
// and get shows them; query finds the nearest records by --embedding or
// --like, with --where, as a table or JSON with id and distance, and
// rejects bad input naming the flag or field.
func TestQuery(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "vectors", "--dimension", "2", "--distance", "l2", "--m", "24")
	get := ok(t, addr, "collections", "get", "vectors").stdout
	for _, want := range []string{"Distance:", "l2", "Index settings:", "m 24, ef_construction 200, ef_search 100"} {
		if !strings.Contains(get, want) {
			t.Errorf("collections get lacks %q:\n%s", want, get)
		}
	}
	if list := ok(t, addr, "collections", "list").stdout; !strings.Contains(list, "DISTANCE") || !strings.Contains(list, "l2") {
		t.Errorf("collections list lacks the distance:\n%s", list)
	}
	createCollection(t, addr, "plain")
	if get := ok(t, addr, "collections", "get", "plain").stdout; !strings.Contains(get, "cosine") {
		t.Errorf("a collection created without --distance is not cosine:\n%s", get)
	}
	off := ok(t, addr, "collections", "create", "off", "--no-index").stdout
	if !strings.Contains(off, "off (queries scan)") {
		t.Errorf("--no-index not shown:\n%s", off)
	}

	var lines strings.Builder
	for i := range 6 {
		fmt.Fprintf(&lines, `{"op": "add", "id": "r%d", "embedding": [%d, 0], "document": "doc %d", "metadata": {"n": %d, "odd": %t}}`+"\n", i, i, i, i, i%2 == 1)
	}
	if r := cli(t, addr, strings.NewReader(lines.String()), "push", "--collection", id, "-"); r.err != nil {
		t.Fatalf("push: %v\n%s", r.err, r.stderr)
	}

	hits := decode[[]hitJSON](t, ok(t, addr, "-o", "json", "query", "vectors", "--embedding", "[2.9, 0]", "-k", "3").stdout)
	if got := ids(hits); got != "r3 r2 r4" {
		t.Errorf("query ids = %s, want r3 r2 r4", got)
	}
	for _, h := range hits {
		if h.Distance == nil || h.Document == nil || h.Metadata == nil {
			t.Errorf("hit %+v lacks its distance, document or metadata", h)
		}
	}
	like := decode[[]hitJSON](t, ok(t, addr, "-o", "json", "query", id, "--like", "r0", "-k", "2", "--where", `{"n": {"$lt": 4}}`).stdout)
	if got := ids(like); got != "r0 r1" || *like[0].Distance != 0 {
		t.Errorf("--like r0 = %s (%v), want r0 at 0 then r1", got, like)
	}
	odd := decode[[]hitJSON](t, ok(t, addr, "-o", "json", "query", "vectors", "--embedding", "[0, 0]", "--where", `{"odd": true}`, "--exact").stdout)
	if got := ids(odd); got != "r1 r3 r5" {
		t.Errorf("--where odd = %s, want r1 r3 r5", got)
	}
	table := ok(t, addr, "query", "vectors", "--embedding", "[5, 0]", "-k", "2").stdout
	for _, want := range []string{"ID", "DISTANCE", "r5", "doc 4", `{"n":4,"odd":false}`} {
		if !strings.Contains(table, want) {
			t.Errorf("query table lacks %q:\n%s", want, table)
		}
	}
	if r := ok(t, addr, "query", "vectors", "--embedding", "[5, 0]", "--where", `{"n": {"$gt": 100}}`); !strings.Contains(r.stderr, "no records") {
		t.Errorf("an empty result does not say so: %q", r.stderr)
	}

	fails(t, addr, nil, 2, "give --embedding JSON or --like RECORD_ID", "query", "vectors")
	fails(t, addr, nil, 2, "give --embedding JSON or --like RECORD_ID", "query", "vectors", "--embedding", "[1,2]", "--like", "r1")
	fails(t, addr, nil, 2, "-k must be in 1..1000", "query", "vectors", "--embedding", "[1,2]", "-k", "0")
	fails(t, addr, nil, 2, "--embedding is not a JSON array", "query", "vectors", "--embedding", "[1,")
	fails(t, addr, nil, 2, "--where is not a JSON object", "query", "vectors", "--embedding", "[1,2]", "--where", "[1]")
	fails(t, addr, nil, 1, "embeddings[0]", "query", "vectors", "--embedding", "[1,2,3]")
	fails(t, addr, nil, 1, "where.n.$gtt", "query", "vectors", "--embedding", "[1,2]", "--where", `{"n": {"$gtt": 1}}`)
	fails(t, addr, nil, 1, "where.n.$gt", "query", "vectors", "--embedding", "[1,2]", "--where", `{"n": {"$gt": "x"}}`)
	fails(t, addr, nil, 1, `record "nope" does not exist`, "query", "vectors", "--like", "nope")
	fails(t, addr, nil, 2, `--distance "hamming" is not l2, cosine or ip`, "collections", "create", "bad", "--distance", "hamming")
	fails(t, addr, nil, 1, "index.m", "collections", "create", "bad", "--m", "1")
}

func ids(hs []hitJSON) string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.ID
	}
	return strings.Join(out, " ")
}
