package where

import (
	"errors"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	games := map[string]any{"section": "games", "size": 150.0, "free": true}
	docs := map[string]any{"section": "doc", "size": 20.0}
	none := map[string]any(nil)
	tests := []struct {
		name  string
		where string
		md    map[string]any
		want  bool
	}{
		{"an empty filter matches everything", `{}`, none, true},
		{"null matches everything", `null`, none, true},
		{"an implicit $eq matches an equal string", `{"section": "games"}`, games, true},
		{"an implicit $eq rejects another string", `{"section": "games"}`, docs, false},
		{"$eq on a missing key does not match", `{"section": "games"}`, none, false},
		{"$eq of another type does not match", `{"size": "150"}`, games, false},
		{"$eq on a number: 150 and 150.0 are equal", `{"size": {"$eq": 150.0}}`, games, true},
		{"$eq on a boolean", `{"free": true}`, games, true},
		{"$eq true is not the number 1", `{"size": {"$eq": true}}`, map[string]any{"size": 1.0}, false},
		{"$ne on a different value matches", `{"section": {"$ne": "games"}}`, docs, true},
		{"$ne on an equal value does not match", `{"section": {"$ne": "games"}}`, games, false},
		{"$ne on a missing key matches", `{"section": {"$ne": "games"}}`, none, true},
		{"$ne of another type matches", `{"size": {"$ne": "150"}}`, games, true},
		{"$gt above", `{"size": {"$gt": 100}}`, games, true},
		{"$gt below", `{"size": {"$gt": 100}}`, docs, false},
		{"$gt at the bound", `{"size": {"$gt": 150}}`, games, false},
		{"$gte at the bound", `{"size": {"$gte": 150}}`, games, true},
		{"$lt below", `{"size": {"$lt": 100}}`, docs, true},
		{"$lte at the bound", `{"size": {"$lte": 20}}`, docs, true},
		{"$lt on a missing key does not match", `{"size": {"$lt": 100}}`, none, false},
		{"$lt on a string value does not match", `{"section": {"$lt": 100}}`, games, false},
		{"$in holds the value", `{"section": {"$in": ["doc", "games"]}}`, games, true},
		{"$in lacks the value", `{"section": {"$in": ["doc", "net"]}}`, games, false},
		{"$in of numbers", `{"size": {"$in": [1, 150, 3]}}`, games, true},
		{"$in of numbers against a string", `{"section": {"$in": [1, 2]}}`, games, false},
		{"$in of booleans", `{"free": {"$in": [false, true]}}`, games, true},
		{"$in on a missing key does not match", `{"section": {"$in": ["games"]}}`, none, false},
		{"$nin lacks the value", `{"section": {"$nin": ["doc"]}}`, games, true},
		{"$nin holds the value", `{"section": {"$nin": ["games"]}}`, games, false},
		{"$nin on a missing key matches", `{"section": {"$nin": ["games"]}}`, none, true},
		{"$and of two true clauses", `{"$and": [{"section": "games"}, {"size": {"$gt": 100}}]}`, games, true},
		{"$and with one false clause", `{"$and": [{"section": "games"}, {"size": {"$lt": 100}}]}`, games, false},
		{"$and of one clause", `{"$and": [{"section": "games"}]}`, games, true},
		{"$or with one true clause", `{"$or": [{"section": "doc"}, {"size": {"$gt": 100}}]}`, games, true},
		{"$or of false clauses", `{"$or": [{"section": "doc"}, {"size": {"$lt": 100}}]}`, games, false},
		{"nested $or inside $and", `{"$and": [{"$or": [{"section": "doc"}, {"free": true}]}, {"size": {"$gte": 150}}]}`, games, true},
		{"several keys are $and-ed", `{"section": "games", "size": 150}`, games, true},
		{"several keys, one false", `{"section": "games", "size": 151}`, games, false},
		{"a key beside $or", `{"section": "games", "$or": [{"size": 1}, {"free": true}]}`, games, true},
		{"a key with a dot is one key", `{"a.b": 1}`, map[string]any{"a.b": 1.0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.where))
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.where, err)
			}
			if got := f.Match(tt.md); got != tt.want {
				t.Errorf("Parse(%s).Match(%v) = %v, want %v", tt.where, tt.md, got, tt.want)
			}
			// The canonical form means the same.
			g, err := Parse([]byte(f.String()))
			if err != nil {
				t.Fatalf("Parse(String() = %s): %v", f.String(), err)
			}
			if got := g.Match(tt.md); got != tt.want {
				t.Errorf("Parse(%s).Match = %v, want %v", f.String(), got, tt.want)
			}
		})
	}
}

func TestParseErrorsNameThePath(t *testing.T) {
	tests := []struct {
		name, where, path, problem string
	}{
		{"not an object", `[1]`, "where", "must be an object, got list"},
		{"not JSON", `{"a": `, "where", "is not valid JSON"},
		{"trailing data", `{"a": 1} {}`, "where", "has data after"},
		{"an unknown operator", `{"size": {"$gtt": 1}}`, "where.size.$gtt", `unknown operator "$gtt"`},
		{"an unknown logical operator", `{"$not": [{"a": 1}]}`, "where.$not", `unknown logical operator "$not"`},
		{"$gt with a string", `{"size": {"$gt": "100"}}`, "where.size.$gt", "compares with numbers only, got string"},
		{"$lte with a boolean", `{"size": {"$lte": true}}`, "where.size.$lte", "compares with numbers only, got boolean"},
		{"an empty $and", `{"$and": []}`, "where.$and", "is an empty list"},
		{"an empty $or", `{"$or": []}`, "where.$or", "is an empty list"},
		{"$and not a list", `{"$and": {"a": 1}}`, "where.$and", "must be a list of where objects, got object"},
		{"$or holding a string", `{"$or": [{"a": 1}, "b"]}`, "where.$or[1]", "must be a where object, got string"},
		{"an empty object in $and", `{"$and": [{}]}`, "where.$and[0]", "is an empty object"},
		{"a deep error", `{"$and": [{"a": 1}, {"$or": [{"b": {"$in": []}}]}]}`, "where.$and[1].$or[0].b.$in", "is an empty list"},
		{"two operators on a key", `{"size": {"$gt": 1, "$lt": 5}}`, "where.size", "exactly one operator, got 2 ($gt, $lt)"},
		{"no operator on a key", `{"size": {}}`, "where.size", "exactly one operator, got 0"},
		{"a null value", `{"size": null}`, "where.size", "is null"},
		{"a list value", `{"size": [1, 2]}`, "where.size", "must be a string, number or boolean, got list"},
		{"$eq with a list", `{"size": {"$eq": [1]}}`, "where.size.$eq", "got list"},
		{"$in not a list", `{"size": {"$in": 1}}`, "where.size.$in", "must be a list"},
		{"$in of mixed types", `{"size": {"$in": [1, "a"]}}`, "where.size.$in[1]", "is a string, but the list holds numbers"},
		{"$nin with a null", `{"size": {"$nin": [null]}}`, "where.size.$nin[0]", "is null"},
		{"a number out of range", `{"size": {"$gt": 1e999}}`, "where.size.$gt", "out of range"},
		{"an empty key", `{"": 1}`, "where.", "the metadata key is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.where))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%s) = %v, want an *Error", tt.where, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			if e.Path != tt.path || !strings.Contains(e.Problem, tt.problem) {
				t.Errorf("Parse(%s) = %q at %q, want %q at %q", tt.where, e.Problem, e.Path, tt.problem, tt.path)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat(`{"$and": [`, MaxDepth+1) + `{"a": 1}` + strings.Repeat(`]}`, MaxDepth+1)
	if _, err := Parse([]byte(deep)); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("a filter nested %d levels: %v, want a depth error", MaxDepth+1, err)
	}
	ok := strings.Repeat(`{"$and": [`, MaxDepth) + `{"a": 1}` + strings.Repeat(`]}`, MaxDepth)
	if _, err := Parse([]byte(ok)); err != nil {
		t.Errorf("a filter nested %d levels: %v", MaxDepth, err)
	}
	var b strings.Builder
	b.WriteString(`{"$or": [`)
	for i := range MaxClauses + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"a": 1}`)
	}
	b.WriteString(`]}`)
	if _, err := Parse([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "clauses") {
		t.Errorf("a filter of %d clauses: %v, want a clause-count error", MaxClauses+1, err)
	}
}

func TestCompileTakesStructMaps(t *testing.T) {
	// What structpb.Struct.AsMap gives: float64 numbers.
	f, err := Compile(map[string]any{"size": map[string]any{"$in": []any{1.0, 2.0}}})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match(map[string]any{"size": 2.0}) || f.Match(map[string]any{"size": 3.0}) {
		t.Errorf("Compile($in [1, 2]) matches wrongly")
	}
	if _, err := Compile("x"); err == nil {
		t.Errorf("Compile of a string: no error")
	}
	if f, err := Compile(nil); err != nil || !f.MatchAll() {
		t.Errorf("Compile(nil) = %v, %v; want a match-all filter", f, err)
	}
}

func TestKeys(t *testing.T) {
	f, err := Parse([]byte(`{"$or": [{"b": 1}, {"a": {"$in": [1]}}, {"$and": [{"b": 2}, {"c": 3}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Keys(), ","); got != "a,b,c" {
		t.Errorf("Keys() = %s, want a,b,c", got)
	}
}

// FuzzParseWhere: Parse never panics, and a filter that parses prints a
// canonical form that parses to the same canonical form and matches the
// same records.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{
		`{"section": "games"}`, `{"size": {"$gt": 100}}`, `{"$and": [{"a": 1}, {"b": {"$ne": "x"}}]}`,
		`{"$or": [{"a": {"$in": [1, 2]}}, {"b": {"$nin": ["x"]}}]}`, `{"a": true, "b": {"$lte": -1.5e3}}`,
		`{"$and": []}`, `{"a": {"$gtt": 1}}`, `null`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	samples := []map[string]any{nil, {"a": 1.0, "b": "x"}, {"a": 2.0, "b": true, "size": 150.0, "section": "games"}, {"a": "1"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error %v does not match ErrInvalid", err)
			}
			return
		}
		s := w.String()
		w2, err := Parse([]byte(s))
		if err != nil {
			t.Fatalf("Parse(String() = %s): %v", s, err)
		}
		if s2 := w2.String(); s2 != s {
			t.Fatalf("canonical form not stable: %s then %s", s, s2)
		}
		var st Stats
		for _, md := range samples {
			if w.Match(md) != w2.Match(md) {
				t.Fatalf("%s and its canonical form %s disagree on %v", b, s, md)
			}
			st.Add(md)
		}
		if sel := w.Selectivity(&st); sel < 0 || sel > 1 || sel != sel {
			t.Fatalf("Selectivity(%s) = %v, outside 0..1", s, sel)
		}
	})
}
