// Package where is the metadata filter of queries, in Chroma's `where`
// syntax, so that Chroma's users need learn nothing new:
//
//	{"section": "games"}                       implicit $eq
//	{"size": {"$gt": 100}}                     one operator on a key
//	{"$and": [{"a": 1}, {"b": {"$ne": 2}}]}    every clause
//	{"$or": [...]}                             at least one clause
//
// Operators on a key: $eq and $ne (a string, number or boolean), $gt $gte
// $lt $lte (a number), $in and $nin (a non-empty list of strings, numbers or
// booleans, all of one type).
//
// Semantics, as Chroma's:
//   - A record without the key, or whose value is of another type than the
//     operand, matches neither $eq, $in nor a comparison; $ne and $nin are
//     their complements, so such a record matches them.
//   - Numbers are 64-bit floats (the store keeps metadata numbers so):
//     1 and 1.0 are equal.
//
// Two departures, both accepting more than Chroma does: an object with
// several keys is the $and of one clause per key ({"a": 1, "b": 2}, which
// older Chroma versions accepted too), and $and/$or take one clause or more
// (Chroma asks for two).
//
// The package is pure: no I/O, nothing of the rest of the project.
package where

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Limits of a filter, so that a hostile one costs little to reject.
const (
	// MaxDepth is the deepest nesting of $and/$or.
	MaxDepth = 32
	// MaxClauses is the most clauses (key conditions and $and/$or) in one
	// filter.
	MaxClauses = 1_000
	// MaxListValues is the most values of one $in or $nin.
	MaxListValues = 10_000
)

// ErrInvalid is matched (errors.Is) by every error of Parse and Compile.
var ErrInvalid = errors.New("invalid where filter")

// Error is a filter that does not parse: Path says where ("where",
// "where.$and[1].size.$gt"), Problem what is wrong.
type Error struct {
	Path    string
	Problem string
}

func (e *Error) Error() string { return e.Path + ": " + e.Problem }

// Is makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func errAt(path, format string, args ...any) error {
	return &Error{Path: path, Problem: fmt.Sprintf(format, args...)}
}

// Op is an operator on a key.
type Op string

// The operators on a key.
const (
	Eq  Op = "$eq"
	Ne  Op = "$ne"
	Gt  Op = "$gt"
	Gte Op = "$gte"
	Lt  Op = "$lt"
	Lte Op = "$lte"
	In  Op = "$in"
	Nin Op = "$nin"
)

// Filter is a parsed filter. The zero value (and nil) matches every
// record.
type Filter struct {
	root *node
}

// kind of a node.
type kind uint8

const (
	kindAnd kind = iota + 1
	kindOr
	kindKey
)

type node struct {
	kind kind
	kids []*node // and, or

	// key conditions
	key    string
	op     Op
	value  any   // $eq $ne: string, float64 or bool; comparisons: float64
	values []any // $in $nin, sorted for strings and numbers
}

// Parse parses a filter from JSON (an object). Empty input and "null"
// give the filter that matches everything; "{}" too. Errors are *Error
// (matching ErrInvalid) naming the path.
func Parse(b []byte) (*Filter, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return &Filter{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errAt("where", "is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errAt("where", "has data after the JSON object")
	}
	return Compile(v)
}

// Compile builds a filter from a decoded JSON value: map[string]any with
// values of string, float64 or json.Number, bool, nil, []any and
// map[string]any (what encoding/json and structpb's AsMap produce). nil
// and an empty map match everything. Errors as Parse's.
func Compile(v any) (*Filter, error) {
	if v == nil {
		return &Filter{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errAt("where", "must be an object, got %s", typeName(v))
	}
	if len(m) == 0 {
		return &Filter{}, nil
	}
	p := parser{}
	root, err := p.object("where", m, 0)
	if err != nil {
		return nil, err
	}
	return &Filter{root: root}, nil
}

type parser struct {
	clauses int
}

func (p *parser) count(path string) error {
	p.clauses++
	if p.clauses > MaxClauses {
		return errAt(path, "the filter has more than %d clauses", MaxClauses)
	}
	return nil
}

// object parses a where object: one clause per key, $and-ed.
func (p *parser) object(path string, m map[string]any, depth int) (*node, error) {
	if len(m) == 0 {
		return nil, errAt(path, "is an empty object; give a key condition, $and or $or")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // errors and evaluation in a fixed order
	kids := make([]*node, 0, len(keys))
	for _, k := range keys {
		n, err := p.clause(path, k, m[k], depth)
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &node{kind: kindAnd, kids: kids}, nil
}

func (p *parser) clause(path, key string, v any, depth int) (*node, error) {
	switch key {
	case "$and", "$or":
		sub := path + "." + key
		if err := p.count(sub); err != nil {
			return nil, err
		}
		if depth >= MaxDepth {
			return nil, errAt(sub, "nests $and/$or deeper than %d levels", MaxDepth)
		}
		list, ok := v.([]any)
		if !ok {
			return nil, errAt(sub, "must be a list of where objects, got %s", typeName(v))
		}
		if len(list) == 0 {
			return nil, errAt(sub, "is an empty list; give at least one where object")
		}
		n := &node{kind: kindAnd}
		if key == "$or" {
			n.kind = kindOr
		}
		for i, e := range list {
			ep := fmt.Sprintf("%s[%d]", sub, i)
			m, ok := e.(map[string]any)
			if !ok {
				return nil, errAt(ep, "must be a where object, got %s", typeName(e))
			}
			kid, err := p.object(ep, m, depth+1)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		return n, nil
	}
	kp := path + "." + key
	if strings.HasPrefix(key, "$") {
		return nil, errAt(kp, "unknown logical operator %q (want $and or $or, or a metadata key)", key)
	}
	if key == "" {
		return nil, errAt(kp, "the metadata key is empty")
	}
	if err := p.count(kp); err != nil {
		return nil, err
	}
	ops, ok := v.(map[string]any)
	if !ok {
		val, err := scalar(kp, v)
		if err != nil {
			return nil, err
		}
		return &node{kind: kindKey, key: key, op: Eq, value: val}, nil
	}
	if len(ops) != 1 {
		names := make([]string, 0, len(ops))
		for k := range ops {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, errAt(kp, "must have exactly one operator, got %d (%s); combine several with $and", len(ops), strings.Join(names, ", "))
	}
	for name, operand := range ops {
		return operator(kp, key, Op(name), operand)
	}
	panic("unreachable")
}

func operator(path, key string, op Op, operand any) (*node, error) {
	op2 := path + "." + string(op)
	n := &node{kind: kindKey, key: key, op: op}
	switch op {
	case Eq, Ne:
		val, err := scalar(op2, operand)
		if err != nil {
			return nil, err
		}
		n.value = val
	case Gt, Gte, Lt, Lte:
		val, err := scalar(op2, operand)
		if err != nil {
			return nil, err
		}
		f, ok := val.(float64)
		if !ok {
			return nil, errAt(op2, "compares with numbers only, got %s", typeName(val))
		}
		n.value = f
	case In, Nin:
		list, ok := operand.([]any)
		if !ok {
			return nil, errAt(op2, "must be a list of strings, numbers or booleans, got %s", typeName(operand))
		}
		if len(list) == 0 {
			return nil, errAt(op2, "is an empty list; give at least one value")
		}
		if len(list) > MaxListValues {
			return nil, errAt(op2, "has %d values, more than the limit of %d", len(list), MaxListValues)
		}
		vals := make([]any, len(list))
		for i, e := range list {
			val, err := scalar(fmt.Sprintf("%s[%d]", op2, i), e)
			if err != nil {
				return nil, err
			}
			if i > 0 && typeName(val) != typeName(vals[0]) {
				return nil, errAt(fmt.Sprintf("%s[%d]", op2, i), "is a %s, but the list holds %ss; give values of one type", typeName(val), typeName(vals[0]))
			}
			vals[i] = val
		}
		switch vals[0].(type) {
		case string:
			slices.SortFunc(vals, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
		case float64:
			slices.SortFunc(vals, func(a, b any) int { return cmpFloat(a.(float64), b.(float64)) })
		}
		n.values = vals
	default:
		return nil, errAt(op2, "unknown operator %q (want $eq, $ne, $gt, $gte, $lt, $lte, $in or $nin)", string(op))
	}
	return n, nil
}

// scalar converts an operand to string, float64 or bool.
func scalar(path string, v any) (any, error) {
	switch x := v.(type) {
	case string, bool:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errAt(path, "is not a finite number")
		}
		return x, nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, errAt(path, "the number %s is out of range", echo(string(x)))
		}
		return f, nil
	case nil:
		return nil, errAt(path, "is null; give a string, number or boolean")
	}
	return nil, errAt(path, "must be a string, number or boolean, got %s", typeName(v))
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, json.Number, int, int64:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func echo(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// MatchAll reports whether the filter matches every record (no condition).
func (f *Filter) MatchAll() bool { return f == nil || f.root == nil }

// Match reports whether a record with metadata md (nil: none) passes the
// filter. Metadata values are string, float64 or bool (as the store keeps
// them); other types match no $eq, $in or comparison.
func (f *Filter) Match(md map[string]any) bool {
	if f.MatchAll() {
		return true
	}
	return f.root.match(md)
}

func (n *node) match(md map[string]any) bool {
	switch n.kind {
	case kindAnd:
		for _, k := range n.kids {
			if !k.match(md) {
				return false
			}
		}
		return true
	case kindOr:
		for _, k := range n.kids {
			if k.match(md) {
				return true
			}
		}
		return false
	}
	v, present := md[n.key]
	switch n.op {
	case Eq:
		return present && equal(v, n.value)
	case Ne:
		return !present || !equal(v, n.value)
	case In:
		return present && n.in(v)
	case Nin:
		return !present || !n.in(v)
	}
	x, ok := v.(float64)
	if !present || !ok {
		return false
	}
	y := n.value.(float64)
	switch n.op {
	case Gt:
		return x > y
	case Gte:
		return x >= y
	case Lt:
		return x < y
	case Lte:
		return x <= y
	}
	return false
}

// equal compares values of the same type; different types are unequal.
func equal(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return false
}

func (n *node) in(v any) bool {
	switch x := v.(type) {
	case string:
		if _, ok := n.values[0].(string); !ok {
			return false
		}
		_, found := slices.BinarySearchFunc(n.values, x, func(e any, t string) int { return strings.Compare(e.(string), t) })
		return found
	case float64:
		if _, ok := n.values[0].(float64); !ok {
			return false
		}
		_, found := slices.BinarySearchFunc(n.values, x, func(e any, t float64) int { return cmpFloat(e.(float64), t) })
		return found
	case bool:
		for _, e := range n.values {
			if e == any(x) {
				return true
			}
		}
	}
	return false
}

// Keys returns the metadata keys the filter reads, sorted, each once: what a
// planner needs to look up selectivity statistics.
func (f *Filter) Keys() []string {
	if f.MatchAll() {
		return nil
	}
	var keys []string
	var walk func(*node)
	walk = func(n *node) {
		if n.kind == kindKey {
			keys = append(keys, n.key)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(f.root)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// String returns the filter as canonical JSON (keys sorted, implicit $eq
// and multi-key objects spelled out): the same filter prints the same,
// and Parse(String()) gives an equivalent filter. "{}" for MatchAll.
func (f *Filter) String() string {
	if f.MatchAll() {
		return "{}"
	}
	b, _ := json.Marshal(f.root.json())
	return string(b)
}

func (n *node) json() any {
	switch n.kind {
	case kindAnd, kindOr:
		name := "$and"
		if n.kind == kindOr {
			name = "$or"
		}
		list := make([]any, len(n.kids))
		for i, k := range n.kids {
			list[i] = k.json()
		}
		return map[string]any{name: list}
	}
	var operand any = n.value
	if n.op == In || n.op == Nin {
		operand = n.values
	}
	return map[string]any{n.key: map[string]any{string(n.op): operand}}
}
