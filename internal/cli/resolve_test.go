package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	compactorv1 "github.com/compactorhq/compactor/gen/compactor/v1"
	"github.com/compactorhq/compactor/gen/compactor/v1/compactorv1connect"
)

func TestMatchCollection(t *testing.T) {
	coll := func(id, name string) *compactorv1.Collection { return &compactorv1.Collection{Id: id, Name: name} }
	bookworm := coll("0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c", "debian-bookworm")
	trixie := coll("0b6a9999-8f1e-4a55-9f0e-5c1d2f3a4b5c", "debian-trixie")
	// A name that is also the start of another collection's id.
	tricky := coll("7f000000-0000-4000-8000-000000000000", "0b6a3c")
	all := []*compactorv1.Collection{bookworm, trixie, tricky}
	var many []*compactorv1.Collection
	for i := range 12 {
		many = append(many, coll(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), fmt.Sprintf("c%02d", i)))
	}
	for _, tt := range []struct {
		name string
		all  []*compactorv1.Collection
		ref  string
		want *compactorv1.Collection
		err  []string // in the error, when one is expected
	}{
		{"a name", all, "debian-bookworm", bookworm, nil},
		{"a unique id prefix", all, "0b6a3c0e", bookworm, nil},
		{"an id prefix in capitals", all, "0B6A99", trixie, nil},
		{"an id prefix shared by two", all, "0b6a", nil, []string{`"0b6a" is ambiguous`, "2 collections", "debian-bookworm (0b6a3c0e-", "debian-trixie (0b6a9999-", "give the full id"}},
		{"a name that is another's id prefix", all, "0b6a3c", nil, []string{"ambiguous", "0b6a3c (7f000000-", "debian-bookworm (0b6a3c0e-"}},
		{"a short prefix is no prefix", all, "0b6", nil, []string{`collection "0b6" not found`}},
		{"an unknown name lists similar names", all, "debian", nil, []string{`collection "debian" not found`, "similar names: debian-bookworm (0b6a3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c), debian-trixie"}},
		{"an unknown name lists the first collections", many, "nope", nil, []string{"collections: c00 (00000000-", "c09", "and 2 more (see: compactor collections)"}},
		{"no collections at all", nil, "nope", nil, []string{"the server has no collections", "compactor collections create"}},
		{"a hostile name is escaped", all, "x\x1b[2J", nil, []string{`"x\x1b[2J" not found`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := matchCollection(tt.all, tt.ref)
			if tt.err == nil {
				if err != nil || got != tt.want {
					t.Fatalf("got %v, %v; want %v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %v, want an error", got)
			}
			for _, w := range tt.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\x1b") {
				t.Errorf("the error carries a raw escape: %q", err)
			}
		})
	}
}

// countingCollections serves ListCollections from a fixed list, in pages of
// two, and counts the calls.
type countingCollections struct {
	compactorv1connect.UnimplementedCollectionServiceHandler
	all   []*compactorv1.Collection
	lists int
}

func (f *countingCollections) ListCollections(_ context.Context, req *connect.Request[compactorv1.ListCollectionsRequest]) (*connect.Response[compactorv1.ListCollectionsResponse], error) {
	f.lists++
	start := 0
	if tok := req.Msg.GetPageToken(); tok != "" {
		fmt.Sscan(tok, &start)
	}
	end := min(start+2, len(f.all))
	res := &compactorv1.ListCollectionsResponse{Collections: f.all[start:end]}
	if end < len(f.all) {
		res.NextPageToken = fmt.Sprint(end)
	}
	return connect.NewResponse(res), nil
}

// TestResolveCollectionsPassesIDsAndListsOnce: ids go to the server as they
// are, with no call; names are resolved with one listing (all its pages)
// for the whole command line.
func TestResolveCollectionsPassesIDsAndListsOnce(t *testing.T) {
	fake := &countingCollections{}
	for i := range 5 {
		fake.all = append(fake.all, &compactorv1.Collection{Id: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i), Name: fmt.Sprintf("c%d", i)})
	}
	addr := serveFake(t, func(mux *http.ServeMux) { mux.Handle(compactorv1connect.NewCollectionServiceHandler(fake)) })
	g := &globals{addr: addr, protocol: "connect", output: "table"}
	c, err := g.connect(&cobra.Command{})
	if err != nil {
		t.Fatal(err)
	}
	s := &session{g: g, c: c, out: newOutput(g)}
	id := "6a1b3c0e-8f1e-4a55-9f0e-5c1d2f3a4b5c"
	ids, err := s.resolveCollections(context.Background(), []string{id})
	if err != nil || ids[0] != id || fake.lists != 0 {
		t.Fatalf("an id: %v, %v after %d listings; want it as it is, without a call", ids, err, fake.lists)
	}
	ids, err = s.resolveCollections(context.Background(), []string{"c4", id, "c0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fake.all[4].GetId(), id, fake.all[0].GetId()}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("resolved %v, want %v", ids, want)
	}
	if fake.lists != 3 {
		t.Fatalf("%d ListCollections calls, want the 3 pages of one listing", fake.lists)
	}
}

// TestCommandsTakeCollectionNames: every command that takes a collection
// takes its name, against a real server.
func TestCommandsTakeCollectionNames(t *testing.T) {
	t.Parallel()
	addr := startServer(t, nil)
	id := createCollection(t, addr, "debian-bookworm", "--dimension", "2")
	createCollection(t, addr, "other")
	file := jsonl(t, `{"id":"a","embedding":[1,2]}`, `{"id":"b","embedding":[3,4]}`)

	if p := decode[pushJSON](t, ok(t, addr, "-o", "json", "push", "--collection", "debian-bookworm", file).stdout); p.CollectionID != id || p.Records != 2 {
		t.Fatalf("push by name: %+v", p)
	}
	if c := decode[collectionJSON](t, ok(t, addr, "-o", "json", "collections", "get", "debian-bookworm").stdout); c.ID != id {
		t.Fatalf("collections get by name: %+v", c)
	}
	ok(t, addr, "compact", "debian-bookworm", "--wait")
	if jobs := decode[[]jobJSON](t, ok(t, addr, "-o", "json", "jobs", "--collection", "debian-bookworm").stdout); len(jobs) != 1 || jobs[0].CollectionID != id {
		t.Fatalf("jobs --collection by name: %+v", jobs)
	}
	if out := ok(t, addr, "get", "--collection", "debian-bookworm", "a").stdout; !strings.Contains(out, "a ") {
		t.Fatalf("get by name:\n%s", out)
	}
	if out := ok(t, addr, "pause", "debian-bookworm", "--reason", "by name").stdout; !strings.Contains(out, "by name") {
		t.Fatalf("pause by name:\n%s", out)
	}
	ok(t, addr, "resume", "debian-bookworm")
	ok(t, addr, "collections", "set", "debian-bookworm", "--min-compaction-size", "5")
	fails(t, addr, nil, 1, `collection "debian" not found (no collection has this name or id); similar names: debian-bookworm (`+id+")",
		"compact", "debian")
	fails(t, addr, nil, 1, `collection "nope" not found`, "push", "--collection", "nope", file)
	ok(t, addr, "collections", "delete", "debian-bookworm")
	fails(t, addr, nil, 1, "collections: other (", "collections", "get", "debian-bookworm")
}
