package segment

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeMetadata decodes the metadata column's JSON text of one record as
// json.Unmarshal into a map[string]any does (nil for the literal null). The
// writer stores flat objects of strings, numbers and bools without
// whitespace; those, when their strings hold no escapes, are decoded here
// directly, several times faster than encoding/json's reflection (a block
// decode spent half its time there). Anything else (escapes, nesting,
// invalid UTF-8, malformed text) goes to json.Unmarshal, so that results
// and errors are exactly its own.
func decodeMetadata(b []byte) (map[string]any, error) {
	if m, ok := decodeFlatObject(b); ok {
		return m, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeFlatObject decodes b when it is a JSON object whose keys and
// string values hold no escape and whose values are strings, numbers,
// true, false or null; ok false otherwise (b may still be valid JSON).
func decodeFlatObject(b []byte) (m map[string]any, ok bool) {
	if !utf8.Valid(b) {
		return nil, false
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	m = make(map[string]any, 4)
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return m, skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := plainString(b, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return nil, false
		}
		var v any
		switch c := b[i]; {
		case c == '"':
			s, j, ok := plainString(b, i)
			if !ok {
				return nil, false
			}
			v, i = s, j
		case c == 't' && hasAt(b, i, "true"):
			v, i = true, i+4
		case c == 'f' && hasAt(b, i, "false"):
			v, i = false, i+5
		case c == 'n' && hasAt(b, i, "null"):
			v, i = nil, i+4
		case c == '-' || c >= '0' && c <= '9':
			j := numberEnd(b, i)
			if j < 0 {
				return nil, false
			}
			f, err := strconv.ParseFloat(string(b[i:j]), 64)
			if err != nil {
				return nil, false // out of range: json.Unmarshal reports it
			}
			v, i = f, j
		default:
			return nil, false
		}
		m[key] = v
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return m, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// plainString reads the JSON string at b[i] when it holds no escape and no
// control character: its text and the index after its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// numberEnd returns the index after the JSON number at b[i]
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or -1 when there is
// none.
func numberEnd(b []byte, i int) int {
	digits := func(i int) int {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}
